file(REMOVE_RECURSE
  "CMakeFiles/test_ops_cnn.dir/tests/test_ops_cnn.c.o"
  "CMakeFiles/test_ops_cnn.dir/tests/test_ops_cnn.c.o.d"
  "test_ops_cnn"
  "test_ops_cnn.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_ops_cnn.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
