file(REMOVE_RECURSE
  "CMakeFiles/test_kernels_conv_linear.dir/tests/test_kernels_conv_linear.c.o"
  "CMakeFiles/test_kernels_conv_linear.dir/tests/test_kernels_conv_linear.c.o.d"
  "test_kernels_conv_linear"
  "test_kernels_conv_linear.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_kernels_conv_linear.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
