file(REMOVE_RECURSE
  "CMakeFiles/test_optcnn.dir/tests/test_optcnn.c.o"
  "CMakeFiles/test_optcnn.dir/tests/test_optcnn.c.o.d"
  "test_optcnn"
  "test_optcnn.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_optcnn.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
