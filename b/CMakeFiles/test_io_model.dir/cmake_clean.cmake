file(REMOVE_RECURSE
  "CMakeFiles/test_io_model.dir/tests/test_io_model.c.o"
  "CMakeFiles/test_io_model.dir/tests/test_io_model.c.o.d"
  "test_io_model"
  "test_io_model.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_io_model.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
