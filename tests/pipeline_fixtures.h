/*
 * pipeline_fixtures.h - what the pipeline tests share (tests/test_pipeline.c,
 * tests/test_search_pipeline.c): a chain of equal layers, a machine whose transfers take no time, a
 * pipelined strategy with every operator unsplit on its stage's first device,
 * and sf_pipeline_even that fails the test on an error. Included after
 * cmocka.h and soapflow's headers.
 */
#ifndef SF_TESTS_PIPELINE_FIXTURES_H
#define SF_TESTS_PIPELINE_FIXTURES_H

/* An input and a chain of `layers` fully connected layers of equal width. */
static sf_graph *chain(int layers, int64_t width, int64_t batch) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("chain");
    sf_shape sh = sf_shape_make(2, (int64_t[]){batch, width});
    int x = sf_graph_add_input(g, "x", &sh, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = width;
    for (int i = 0; i < layers && x >= 0; i++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", i + 1);
        x = sf_graph_add_op(g, SF_OP_LINEAR, name, &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    }
    if (x < 0) fail_msg("chain: %s", err.msg);
    return g;
}

/* One node of `devices` devices whose transfers take no time. */
static sf_machine *free_links(int devices) {
    sf_machine_desc d;
    sf_error err = {0};
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, &err), SF_OK);
    d.nodes = 1;
    d.devices_per_node = devices;
    d.intra = SF_INTRA_PAIRWISE;
    d.intra_bw_Bps = 1e29;
    d.intra_latency_s = 0;
    d.inter_bw_Bps = 1e29;
    d.inter_latency_s = 0;
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

/* Every operator unsplit on the first device of its stage's group of
 * n_dev / p devices, under pl. */
static sf_strategy *staged(const sf_graph *g, const sf_machine *m, const sf_pipeline *pl) {
    int n = sf_graph_num_ops(g), group = sf_machine_num_devices(m) / pl->stages;
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_pipeline_op_chunks(pl, g, chunk);
    sf_strategy *s = sf_strategy_new(g);
    for (int i = 0; i < n; i++) {
        sf_config *c = sf_strategy_config(s, i);
        const sf_op *op = sf_graph_op(g, i);
        int ones[SF_MAX_DIMS];
        for (int k = 0; k < op->space.ndim; k++) ones[k] = 1;
        assert_int_equal(sf_config_set_degrees(c, op->space.ndim, ones), SF_OK);
        c->device[0] = (int16_t)((chunk[i] % pl->stages) * group);
    }
    free(chunk);
    sf_strategy_set_pipeline(s, pl);
    sf_error err = {0};
    if (sf_strategy_validate(s, g, m, &err) != SF_OK) fail_msg("%s", err.msg);
    return s;
}

static sf_pipeline even(const sf_graph *g, int p, int v, int m, sf_pipe_schedule sch) {
    sf_pipeline pl;
    sf_error err = {0};
    if (sf_pipeline_even(&pl, g, p, v, m, sch, &err) != SF_OK) fail_msg("%s", err.msg);
    return pl;
}

#endif
