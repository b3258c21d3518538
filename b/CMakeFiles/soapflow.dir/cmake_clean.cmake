file(REMOVE_RECURSE
  "CMakeFiles/soapflow.dir/src/cli/cli.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cli.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_bench.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_bench.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_calibrate.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_calibrate.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_graph.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_graph.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_machines.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_machines.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_models.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_models.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_profile.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_profile.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_search.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_search.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/cmd_simulate.c.o"
  "CMakeFiles/soapflow.dir/src/cli/cmd_simulate.c.o.d"
  "CMakeFiles/soapflow.dir/src/cli/main.c.o"
  "CMakeFiles/soapflow.dir/src/cli/main.c.o.d"
  "soapflow"
  "soapflow.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/soapflow.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
