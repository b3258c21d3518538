file(REMOVE_RECURSE
  "CMakeFiles/bench_optcnn.dir/bench/bench_optcnn.c.o"
  "CMakeFiles/bench_optcnn.dir/bench/bench_optcnn.c.o.d"
  "bench_optcnn"
  "bench_optcnn.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/bench_optcnn.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
