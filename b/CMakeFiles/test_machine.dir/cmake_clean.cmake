file(REMOVE_RECURSE
  "CMakeFiles/test_machine.dir/tests/test_machine.c.o"
  "CMakeFiles/test_machine.dir/tests/test_machine.c.o.d"
  "test_machine"
  "test_machine.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_machine.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
