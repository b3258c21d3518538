file(REMOVE_RECURSE
  "CMakeFiles/test_mcmc.dir/tests/test_mcmc.c.o"
  "CMakeFiles/test_mcmc.dir/tests/test_mcmc.c.o.d"
  "test_mcmc"
  "test_mcmc.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_mcmc.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
