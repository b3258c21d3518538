file(REMOVE_RECURSE
  "CMakeFiles/test_models.dir/tests/test_models.c.o"
  "CMakeFiles/test_models.dir/tests/test_models.c.o.d"
  "test_models"
  "test_models.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_models.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
