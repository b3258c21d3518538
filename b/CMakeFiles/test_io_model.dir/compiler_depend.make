# Empty compiler generated dependencies file for test_io_model.
# This may be replaced when dependencies are built.
