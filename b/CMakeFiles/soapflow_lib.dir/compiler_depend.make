# Empty compiler generated dependencies file for soapflow_lib.
# This may be replaced when dependencies are built.
