
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/core/arena.c" "CMakeFiles/soapflow_lib.dir/src/core/arena.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/core/arena.c.o.d"
  "/work/main/src/core/log.c" "CMakeFiles/soapflow_lib.dir/src/core/log.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/core/log.c.o.d"
  "/work/main/src/core/progress.c" "CMakeFiles/soapflow_lib.dir/src/core/progress.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/core/progress.c.o.d"
  "/work/main/src/core/rng.c" "CMakeFiles/soapflow_lib.dir/src/core/rng.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/core/rng.c.o.d"
  "/work/main/src/core/status.c" "CMakeFiles/soapflow_lib.dir/src/core/status.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/core/status.c.o.d"
  "/work/main/src/cost/analytic.c" "CMakeFiles/soapflow_lib.dir/src/cost/analytic.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/cost/analytic.c.o.d"
  "/work/main/src/cost/cost.c" "CMakeFiles/soapflow_lib.dir/src/cost/cost.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/cost/cost.c.o.d"
  "/work/main/src/cost/profiled.c" "CMakeFiles/soapflow_lib.dir/src/cost/profiled.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/cost/profiled.c.o.d"
  "/work/main/src/cost/profiler.c" "CMakeFiles/soapflow_lib.dir/src/cost/profiler.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/cost/profiler.c.o.d"
  "/work/main/src/graph/graph.c" "CMakeFiles/soapflow_lib.dir/src/graph/graph.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/graph/graph.c.o.d"
  "/work/main/src/graph/shape.c" "CMakeFiles/soapflow_lib.dir/src/graph/shape.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/graph/shape.c.o.d"
  "/work/main/src/io/dot.c" "CMakeFiles/soapflow_lib.dir/src/io/dot.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/io/dot.c.o.d"
  "/work/main/src/io/file.c" "CMakeFiles/soapflow_lib.dir/src/io/file.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/io/file.c.o.d"
  "/work/main/src/io/machine_json.c" "CMakeFiles/soapflow_lib.dir/src/io/machine_json.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/io/machine_json.c.o.d"
  "/work/main/src/io/model_json.c" "CMakeFiles/soapflow_lib.dir/src/io/model_json.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/io/model_json.c.o.d"
  "/work/main/src/io/strategy_json.c" "CMakeFiles/soapflow_lib.dir/src/io/strategy_json.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/io/strategy_json.c.o.d"
  "/work/main/src/kernels/bench_kernels.c" "CMakeFiles/soapflow_lib.dir/src/kernels/bench_kernels.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/kernels/bench_kernels.c.o.d"
  "/work/main/src/kernels/kernels.c" "CMakeFiles/soapflow_lib.dir/src/kernels/kernels.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/kernels/kernels.c.o.d"
  "/work/main/src/machine/machine.c" "CMakeFiles/soapflow_lib.dir/src/machine/machine.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/machine/machine.c.o.d"
  "/work/main/src/machine/presets.c" "CMakeFiles/soapflow_lib.dir/src/machine/presets.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/machine/presets.c.o.d"
  "/work/main/src/models/zoo.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo.c.o.d"
  "/work/main/src/models/zoo_builder.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_builder.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_builder.c.o.d"
  "/work/main/src/models/zoo_cnn.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_cnn.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_cnn.c.o.d"
  "/work/main/src/models/zoo_inception.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_inception.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_inception.c.o.d"
  "/work/main/src/models/zoo_mlp.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_mlp.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_mlp.c.o.d"
  "/work/main/src/models/zoo_resnet.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_resnet.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_resnet.c.o.d"
  "/work/main/src/models/zoo_rnn.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_rnn.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_rnn.c.o.d"
  "/work/main/src/models/zoo_transformer.c" "CMakeFiles/soapflow_lib.dir/src/models/zoo_transformer.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/models/zoo_transformer.c.o.d"
  "/work/main/src/ops/op_attention.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_attention.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_attention.c.o.d"
  "/work/main/src/ops/op_batchnorm.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_batchnorm.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_batchnorm.c.o.d"
  "/work/main/src/ops/op_binary.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_binary.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_binary.c.o.d"
  "/work/main/src/ops/op_concat.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_concat.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_concat.c.o.d"
  "/work/main/src/ops/op_conv2d.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_conv2d.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_conv2d.c.o.d"
  "/work/main/src/ops/op_dropout.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_dropout.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_dropout.c.o.d"
  "/work/main/src/ops/op_embedding.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_embedding.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_embedding.c.o.d"
  "/work/main/src/ops/op_input.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_input.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_input.c.o.d"
  "/work/main/src/ops/op_layernorm.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_layernorm.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_layernorm.c.o.d"
  "/work/main/src/ops/op_linear.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_linear.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_linear.c.o.d"
  "/work/main/src/ops/op_lstm.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_lstm.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_lstm.c.o.d"
  "/work/main/src/ops/op_matmul.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_matmul.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_matmul.c.o.d"
  "/work/main/src/ops/op_pool2d.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_pool2d.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_pool2d.c.o.d"
  "/work/main/src/ops/op_reshape.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_reshape.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_reshape.c.o.d"
  "/work/main/src/ops/op_softmax_ce.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_softmax_ce.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_softmax_ce.c.o.d"
  "/work/main/src/ops/op_split.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_split.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_split.c.o.d"
  "/work/main/src/ops/op_unary.c" "CMakeFiles/soapflow_lib.dir/src/ops/op_unary.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/op_unary.c.o.d"
  "/work/main/src/ops/registry.c" "CMakeFiles/soapflow_lib.dir/src/ops/registry.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/ops/registry.c.o.d"
  "/work/main/src/search/exhaustive.c" "CMakeFiles/soapflow_lib.dir/src/search/exhaustive.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/search/exhaustive.c.o.d"
  "/work/main/src/search/mcmc.c" "CMakeFiles/soapflow_lib.dir/src/search/mcmc.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/search/mcmc.c.o.d"
  "/work/main/src/search/optcnn.c" "CMakeFiles/soapflow_lib.dir/src/search/optcnn.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/search/optcnn.c.o.d"
  "/work/main/src/sim/sim.c" "CMakeFiles/soapflow_lib.dir/src/sim/sim.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/sim/sim.c.o.d"
  "/work/main/src/sim/sim_trace.c" "CMakeFiles/soapflow_lib.dir/src/sim/sim_trace.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/sim/sim_trace.c.o.d"
  "/work/main/src/strategy/baselines.c" "CMakeFiles/soapflow_lib.dir/src/strategy/baselines.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/strategy/baselines.c.o.d"
  "/work/main/src/strategy/random.c" "CMakeFiles/soapflow_lib.dir/src/strategy/random.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/strategy/random.c.o.d"
  "/work/main/src/strategy/strategy.c" "CMakeFiles/soapflow_lib.dir/src/strategy/strategy.c.o" "gcc" "CMakeFiles/soapflow_lib.dir/src/strategy/strategy.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
