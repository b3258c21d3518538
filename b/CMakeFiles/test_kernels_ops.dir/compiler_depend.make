# Empty compiler generated dependencies file for test_kernels_ops.
# This may be replaced when dependencies are built.
