# Empty compiler generated dependencies file for test_optcnn.
# This may be replaced when dependencies are built.
