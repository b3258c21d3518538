file(REMOVE_RECURSE
  "CMakeFiles/test_ops_seq.dir/tests/test_ops_seq.c.o"
  "CMakeFiles/test_ops_seq.dir/tests/test_ops_seq.c.o.d"
  "test_ops_seq"
  "test_ops_seq.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_ops_seq.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
