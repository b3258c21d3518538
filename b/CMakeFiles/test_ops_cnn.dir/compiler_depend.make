# Empty compiler generated dependencies file for test_ops_cnn.
# This may be replaced when dependencies are built.
