# Empty compiler generated dependencies file for bench_optcnn.
# This may be replaced when dependencies are built.
