# Empty compiler generated dependencies file for test_kernels_fixtures.
# This may be replaced when dependencies are built.
