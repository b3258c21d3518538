file(REMOVE_RECURSE
  "CMakeFiles/test_kernels_seq.dir/tests/test_kernels_seq.c.o"
  "CMakeFiles/test_kernels_seq.dir/tests/test_kernels_seq.c.o.d"
  "test_kernels_seq"
  "test_kernels_seq.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_kernels_seq.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
