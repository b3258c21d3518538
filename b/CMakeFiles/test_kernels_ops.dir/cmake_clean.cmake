file(REMOVE_RECURSE
  "CMakeFiles/test_kernels_ops.dir/tests/test_kernels_ops.c.o"
  "CMakeFiles/test_kernels_ops.dir/tests/test_kernels_ops.c.o.d"
  "test_kernels_ops"
  "test_kernels_ops.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_kernels_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
