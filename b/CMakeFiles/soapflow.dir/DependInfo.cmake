
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/cli/cli.c" "CMakeFiles/soapflow.dir/src/cli/cli.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cli.c.o.d"
  "/work/main/src/cli/cmd_bench.c" "CMakeFiles/soapflow.dir/src/cli/cmd_bench.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_bench.c.o.d"
  "/work/main/src/cli/cmd_calibrate.c" "CMakeFiles/soapflow.dir/src/cli/cmd_calibrate.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_calibrate.c.o.d"
  "/work/main/src/cli/cmd_graph.c" "CMakeFiles/soapflow.dir/src/cli/cmd_graph.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_graph.c.o.d"
  "/work/main/src/cli/cmd_machines.c" "CMakeFiles/soapflow.dir/src/cli/cmd_machines.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_machines.c.o.d"
  "/work/main/src/cli/cmd_models.c" "CMakeFiles/soapflow.dir/src/cli/cmd_models.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_models.c.o.d"
  "/work/main/src/cli/cmd_profile.c" "CMakeFiles/soapflow.dir/src/cli/cmd_profile.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_profile.c.o.d"
  "/work/main/src/cli/cmd_search.c" "CMakeFiles/soapflow.dir/src/cli/cmd_search.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_search.c.o.d"
  "/work/main/src/cli/cmd_simulate.c" "CMakeFiles/soapflow.dir/src/cli/cmd_simulate.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/cmd_simulate.c.o.d"
  "/work/main/src/cli/main.c" "CMakeFiles/soapflow.dir/src/cli/main.c.o" "gcc" "CMakeFiles/soapflow.dir/src/cli/main.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/b/CMakeFiles/soapflow_lib.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
