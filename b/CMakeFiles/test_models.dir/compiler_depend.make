# Empty compiler generated dependencies file for test_models.
# This may be replaced when dependencies are built.
