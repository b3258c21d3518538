# Empty compiler generated dependencies file for test_mcmc.
# This may be replaced when dependencies are built.
