file(REMOVE_RECURSE
  "CMakeFiles/test_kernels_fixtures.dir/tests/test_kernels_fixtures.c.o"
  "CMakeFiles/test_kernels_fixtures.dir/tests/test_kernels_fixtures.c.o.d"
  "test_kernels_fixtures"
  "test_kernels_fixtures.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_kernels_fixtures.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
