# install.cmake - what `cmake --install build --prefix P` puts under P
# (docs/embedding.md): the libraries, the public headers, the soapflow program,
# lib/pkgconfig/soapflow.pc (the planning library) and a CMake package,
# find_package(soapflow), with the targets soapflow::plan and, where they were
# built, soapflow::runtime and soapflow::mpi. Included by CMakeLists.txt once
# every target exists; SF_INSTALL_TARGETS names them.
include(CMakePackageConfigHelpers)

set(SF_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/soapflow")

# One export set per target family, so that a program that plans only needs
# nothing but jansson to find the package (soapflowConfig.cmake loads the
# runtime's and MPI's sets only when their own dependencies are there).
install(TARGETS soapflow_plan EXPORT soapflowPlanTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS soapflow_lib soapflow_runtime EXPORT soapflowRuntimeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(SF_WITH_MPI)
  install(TARGETS soapflow_mpi EXPORT soapflowMpiTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(TARGETS soapflow RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(set Plan Runtime Mpi)
  if(set STREQUAL "Mpi" AND NOT SF_WITH_MPI)
    continue()
  endif()
  install(EXPORT soapflow${set}Targets NAMESPACE soapflow:: DESTINATION ${SF_CMAKE_DIR})
endforeach()

install(DIRECTORY include/soapflow DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES "${SF_GEN_INCLUDE}/soapflow/version.h"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/soapflow)

configure_package_config_file(cmake/soapflowConfig.cmake.in
  "${CMAKE_BINARY_DIR}/cmake/soapflowConfig.cmake" INSTALL_DESTINATION ${SF_CMAKE_DIR})
write_basic_package_version_file("${CMAKE_BINARY_DIR}/cmake/soapflowConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/cmake/soapflowConfig.cmake"
  "${CMAKE_BINARY_DIR}/cmake/soapflowConfigVersion.cmake" DESTINATION ${SF_CMAKE_DIR})

# soapflow.pc, relocatable: the prefix is found from where the file lies, so
# that --prefix at install time is the prefix it names. A static library brings
# its dependencies to every link (Requires, -lm); a shared one only to static links.
file(RELATIVE_PATH SF_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" SF_PC_UP "${SF_PC_UP}")
set(SF_PC_REQUIRES "jansson")
if(SF_WITH_ONNX)
  string(APPEND SF_PC_REQUIRES " libprotobuf-c")
endif()
if(BUILD_SHARED_LIBS)
  set(SF_PC_LINES "Requires.private: ${SF_PC_REQUIRES}\nLibs: -L\${libdir} -lsoapflow_plan\nLibs.private: -lm")
else()
  set(SF_PC_LINES "Requires: ${SF_PC_REQUIRES}\nLibs: -L\${libdir} -lsoapflow_plan -lm")
endif()
configure_file(cmake/soapflow.pc.in "${CMAKE_BINARY_DIR}/cmake/soapflow.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/cmake/soapflow.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
