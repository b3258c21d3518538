# Empty compiler generated dependencies file for test_kernels_seq.
# This may be replaced when dependencies are built.
