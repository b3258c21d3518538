# Empty dependencies file for test_machine.
# This may be replaced when dependencies are built.
