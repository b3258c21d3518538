file(REMOVE_RECURSE
  "CMakeFiles/test_cost.dir/tests/test_cost.c.o"
  "CMakeFiles/test_cost.dir/tests/test_cost.c.o.d"
  "test_cost"
  "test_cost.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cost.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
