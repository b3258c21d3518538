# Empty dependencies file for test_cost.
# This may be replaced when dependencies are built.
