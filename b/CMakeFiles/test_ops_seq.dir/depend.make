# Empty dependencies file for test_ops_seq.
# This may be replaced when dependencies are built.
