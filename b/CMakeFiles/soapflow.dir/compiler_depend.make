# Empty compiler generated dependencies file for soapflow.
# This may be replaced when dependencies are built.
