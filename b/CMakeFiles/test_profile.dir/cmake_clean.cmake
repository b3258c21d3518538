file(REMOVE_RECURSE
  "CMakeFiles/test_profile.dir/tests/test_profile.c.o"
  "CMakeFiles/test_profile.dir/tests/test_profile.c.o.d"
  "test_profile"
  "test_profile.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_profile.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
