# Empty dependencies file for test_strategy.
# This may be replaced when dependencies are built.
