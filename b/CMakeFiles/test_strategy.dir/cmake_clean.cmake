file(REMOVE_RECURSE
  "CMakeFiles/test_strategy.dir/tests/test_strategy.c.o"
  "CMakeFiles/test_strategy.dir/tests/test_strategy.c.o.d"
  "test_strategy"
  "test_strategy.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_strategy.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
