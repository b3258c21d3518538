# Empty compiler generated dependencies file for test_kernels_conv_linear.
# This may be replaced when dependencies are built.
