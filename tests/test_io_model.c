/* Model JSON and DOT: exact round trips over every operator type, and error messages that
 * name the file, the line and column, and the operator, for each kind of bad input. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/models.h"

/* ---- fixtures ------------------------------------------------------------ */

#define TMP_DIR_PATTERN "/tmp/sf_io_model_XXXXXX"
#include "lib/tmpdir.h"

static void tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmp_dir, name);
}

static void write_text(const char *name, const char *text) {
    char path[256];
    tmp_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* ---- building graphs by hand -------------------------------------------- */

static int add(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p,
               const sf_tensor_ref *in, int n_in) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, t, name, p, in, n_in, &err);
    if (id < 0) fail_msg("building '%s': %s", name, err.msg);
    return id;
}

static int add1(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p, int src) {
    return add(g, t, name, p, (sf_tensor_ref[]){{src, 0}}, 1);
}

static sf_op_params defaults(sf_op_type t) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    return p;
}

/* Every CNN-side operator type, with non-default attributes where there are any. */
static sf_graph *build_cnn(void) {
    sf_graph *g = sf_graph_new("cnn \"quoted\"");
    sf_error err = {0};
    sf_shape s = sf_shape_make(4, (int64_t[]){8, 3, 32, 32});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    assert_true(x >= 0);
    sf_op_params p = defaults(SF_OP_CONV2D);
    p.conv2d.out_channels = 16;
    p.conv2d.kernel[0] = 3, p.conv2d.kernel[1] = 5;
    p.conv2d.padding[0] = 1, p.conv2d.padding[1] = 2;
    p.conv2d.bias = 0;
    int c1 = add1(g, SF_OP_CONV2D, "conv1", &p, x);
    p = defaults(SF_OP_BATCHNORM);
    p.norm.eps = 1e-5;
    int bn = add1(g, SF_OP_BATCHNORM, "bn1", &p, c1);
    p = defaults(SF_OP_RELU);
    int r = add1(g, SF_OP_RELU, "relu1", &p, bn);
    p = defaults(SF_OP_POOL2D);
    p.pool2d.mode = SF_POOL_MAX;
    p.pool2d.kernel[0] = p.pool2d.kernel[1] = 3;
    p.pool2d.stride[0] = p.pool2d.stride[1] = 2;
    p.pool2d.padding[0] = p.pool2d.padding[1] = 1;
    p.pool2d.ceil_mode = 1;
    int pool = add1(g, SF_OP_POOL2D, "pool1", &p, r);
    p = defaults(SF_OP_CONV2D);
    p.conv2d.out_channels = 16;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 2;
    p.conv2d.dilation[0] = p.conv2d.dilation[1] = 2;
    p.conv2d.groups = 4;
    int c2 = add1(g, SF_OP_CONV2D, "conv2", &p, pool);
    p = defaults(SF_OP_SIGMOID);
    int sg = add1(g, SF_OP_SIGMOID, "gate", &p, c2);
    p = defaults(SF_OP_MUL);
    int m = add(g, SF_OP_MUL, "gated", &p, (sf_tensor_ref[]){{pool, 0}, {sg, 0}}, 2);
    p = defaults(SF_OP_ADD);
    int a = add(g, SF_OP_ADD, "residual", &p, (sf_tensor_ref[]){{m, 0}, {pool, 0}}, 2);
    p = defaults(SF_OP_POOL2D);
    p.pool2d.mode = SF_POOL_ADAPTIVE_AVG;
    p.pool2d.output_size[0] = p.pool2d.output_size[1] = 1;
    int gap = add1(g, SF_OP_POOL2D, "gap", &p, a);
    p = defaults(SF_OP_FLATTEN);
    p.flatten.start_dim = 1;
    int fl = add1(g, SF_OP_FLATTEN, "flat", &p, gap);
    p = defaults(SF_OP_LINEAR);
    p.linear.out_features = 32;
    int f1 = add1(g, SF_OP_LINEAR, "fc1", &p, fl);
    p = defaults(SF_OP_TANH);
    int th = add1(g, SF_OP_TANH, "tanh1", &p, f1);
    p = defaults(SF_OP_DROPOUT);
    p.dropout.p = 0.1 + 0.2; /* 0.30000000000000004: needs all 17 digits */
    int dr = add1(g, SF_OP_DROPOUT, "drop", &p, th);
    p = defaults(SF_OP_LINEAR);
    p.linear.out_features = 10;
    p.linear.bias = 0;
    int f2 = add1(g, SF_OP_LINEAR, "fc2", &p, dr);
    p = defaults(SF_OP_SOFTMAX_CE);
    add1(g, SF_OP_SOFTMAX_CE, "loss", &p, f2);
    return g;
}

/* Sequence-side types: index input, embedding, split (even and sized), unrolled LSTM steps
 * sharing weights and taking states as outputs 1 and 2, concat, a GRU starting from the
 * last LSTM step's h, layernorm, attention,
 * gelu (its tanh form), matmul, reshape. */
static sf_graph *build_seq(void) {
    sf_graph *g = sf_graph_new("seq");
    sf_error err = {0};
    sf_shape s = sf_shape_make(2, (int64_t[]){8, 12});
    int tok = sf_graph_add_input(g, "tokens", &s, 1, &err);
    assert_true(tok >= 0);
    sf_op_params p = defaults(SF_OP_EMBEDDING);
    p.embedding.num_embeddings = 100;
    p.embedding.embedding_dim = 16;
    int emb = add1(g, SF_OP_EMBEDDING, "emb", &p, tok);
    p = defaults(SF_OP_SPLIT);
    p.split.axis = 1;
    p.split.parts = 3;
    int sp = add1(g, SF_OP_SPLIT, "split0", &p, emb);
    p = defaults(SF_OP_LSTM);
    p.lstm.hidden = 16;
    int t0 = add(g, SF_OP_LSTM, "l0.t0", &p, (sf_tensor_ref[]){{sp, 0}}, 1);
    int t1 = add(g, SF_OP_LSTM, "l0.t1", &p, (sf_tensor_ref[]){{sp, 1}, {t0, 1}, {t0, 2}}, 3);
    int t2 = add(g, SF_OP_LSTM, "l0.t2", &p, (sf_tensor_ref[]){{sp, 2}, {t1, 1}, {t1, 2}}, 3);
    sf_error e2 = {0};
    assert_int_equal(sf_graph_share_weights(g, t1, t0, &e2), SF_OK);
    assert_int_equal(sf_graph_share_weights(g, t2, t1, &e2), SF_OK); /* resolves to t0 */
    p = defaults(SF_OP_CONCAT);
    p.concat.axis = 1;
    int cat = add(g, SF_OP_CONCAT, "cat", &p, (sf_tensor_ref[]){{t0, 0}, {t1, 0}, {t2, 0}}, 3);
    p = defaults(SF_OP_GRU);
    p.gru.hidden = 16;
    int gru = add(g, SF_OP_GRU, "gru", &p, (sf_tensor_ref[]){{cat, 0}, {t2, 1}}, 2);
    p = defaults(SF_OP_LAYERNORM);
    p.norm.eps = 1e-6;
    p.norm.affine = 0;
    int ln = add1(g, SF_OP_LAYERNORM, "ln", &p, gru);
    p = defaults(SF_OP_ATTENTION);
    p.attention.embed_dim = 16;
    p.attention.heads = 4;
    p.attention.causal = 1;
    p.attention.dropout = 0.1;
    int att = add1(g, SF_OP_ATTENTION, "att", &p, ln);
    p = defaults(SF_OP_GELU);
    p.gelu.approximate = SF_GELU_TANH;
    int ge = add1(g, SF_OP_GELU, "gelu", &p, att);
    p = defaults(SF_OP_MATMUL);
    p.matmul.transpose_b = 1;
    int mm = add(g, SF_OP_MATMUL, "scores", &p, (sf_tensor_ref[]){{att, 0}, {ge, 0}}, 2);
    p = defaults(SF_OP_RESHAPE);
    p.reshape.ndim = 2;
    p.reshape.shape[0] = 0;
    p.reshape.shape[1] = -1;
    int rs = add1(g, SF_OP_RESHAPE, "rs", &p, mm);
    p = defaults(SF_OP_SPLIT);
    p.split.axis = -1;
    p.split.parts = 2;
    p.split.sizes[0] = 100;
    p.split.sizes[1] = 44;
    int sp2 = add1(g, SF_OP_SPLIT, "split1", &p, rs);
    p = defaults(SF_OP_SOFTMAX_CE);
    add(g, SF_OP_SOFTMAX_CE, "loss", &p, (sf_tensor_ref[]){{sp2, 1}}, 1);
    return g;
}

/* ---- comparing graphs ---------------------------------------------------- */

static void assert_same_attr(const sf_attr_desc *d, const sf_op *a, const sf_op *b) {
    const char *pa = (const char *)&a->params, *pb = (const char *)&b->params;
    size_t bytes;
    switch (d->type) {
    case SF_ATTR_INT:
        bytes = sizeof(int64_t);
        break;
    case SF_ATTR_FLOAT:
        bytes = sizeof(double);
        break; /* bit for bit */
    case SF_ATTR_INTS: {
        int n = d->count;
        if (n == 0) {
            int na, nb;
            memcpy(&na, pa + d->count_offset, sizeof na);
            memcpy(&nb, pb + d->count_offset, sizeof nb);
            assert_int_equal(na, nb);
            n = na;
        }
        bytes = (size_t)n * sizeof(int64_t);
        break;
    }
    default:
        bytes = sizeof(int);
        break;
    }
    if (memcmp(pa + d->offset, pb + d->offset, bytes) != 0)
        fail_msg("operator '%s': attribute '%s' differs", a->name, d->name);
}

static void assert_same_graph(const sf_graph *a, const sf_graph *b) {
    assert_string_equal(sf_graph_name(a), sf_graph_name(b));
    assert_int_equal(sf_graph_num_ops(a), sf_graph_num_ops(b));
    for (int i = 0; i < sf_graph_num_ops(a); i++) {
        const sf_op *x = sf_graph_op(a, i), *y = sf_graph_op(b, i);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->type, y->type);
        int n_attrs = 0;
        const sf_attr_desc *attrs = sf_op_attrs(x->type, &n_attrs);
        for (int k = 0; k < n_attrs; k++) assert_same_attr(&attrs[k], x, y);
        assert_int_equal(x->n_inputs, y->n_inputs);
        for (int k = 0; k < x->n_inputs; k++) {
            assert_int_equal(x->inputs[k].op, y->inputs[k].op);
            assert_int_equal(x->inputs[k].out, y->inputs[k].out);
        }
        assert_int_equal(x->n_outputs, y->n_outputs);
        for (int k = 0; k < x->n_outputs; k++)
            assert_true(sf_shape_equal(&x->out_shapes[k], &y->out_shapes[k]));
        assert_int_equal(x->weight_owner, y->weight_owner);
        assert_int_equal(x->n_params, y->n_params);
    }
}

/* Save to a file, load it back, compare field by field and the re-serialized text. */
static void assert_round_trip(const sf_graph *g, const char *file) {
    char path[256];
    tmp_path(path, sizeof path, file);
    sf_error err = {0};
    char *text = sf_model_to_json(g, &err);
    if (!text) fail_msg("to_json: %s", err.msg);
    assert_int_equal(sf_model_save_json(g, path, &err), SF_OK);
    sf_graph *back = sf_model_load_json(path, &err);
    if (!back) fail_msg("load %s: %s", file, err.msg);
    assert_same_graph(g, back);
    char *again = sf_model_to_json(back, &err);
    assert_non_null(again);
    assert_string_equal(text, again);
    /* the file on disk is exactly the text */
    size_t len = 0;
    char *disk = sf_read_file(path, &len, &err);
    assert_non_null(disk);
    assert_int_equal(len, strlen(text));
    assert_string_equal(disk, text);
    free(disk);
    free(again);
    free(text);
    sf_graph_free(back);
}

/* ---- tests: descriptors and round trips ---------------------------------- */

/* The reader relies on every operator's table being well formed: check them all. */
static void test_attr_tables_are_sound(void **state) {
    (void)state;
    for (int t = 0; t < SF_OP_COUNT; t++) {
        if (strcmp(sf_op_type_name((sf_op_type)t), "?") == 0) continue;
        int n = 0;
        const sf_attr_desc *d = sf_op_attrs((sf_op_type)t, &n);
        for (int i = 0; i < n; i++) {
            const char *nm = d[i].name;
            assert_non_null(nm);
            assert_true(strcmp(nm, "name") && strcmp(nm, "type") && strcmp(nm, "inputs") &&
                        strcmp(nm, "share_weights"));
            for (int j = 0; j < i; j++) assert_true(strcmp(nm, d[j].name) != 0);
            assert_true(d[i].offset < sizeof(sf_op_params));
            if (d[i].type == SF_ATTR_INTS) {
                int cnt = d[i].count ? d[i].count : d[i].max_count;
                assert_true(cnt > 0);
                assert_true(d[i].offset + (size_t)cnt * sizeof(int64_t) <= sizeof(sf_op_params));
                if (!d[i].count)
                    assert_true(d[i].count_offset + sizeof(int) <= sizeof(sf_op_params));
            }
            if (d[i].type == SF_ATTR_ENUM) {
                assert_non_null(d[i].enum_names);
                assert_true(d[i].n_enum > 0);
            }
        }
    }
}

static void test_round_trip_cnn(void **state) {
    (void)state;
    sf_graph *g = build_cnn();
    assert_round_trip(g, "cnn.json");
    sf_error err = {0};
    char *text = sf_model_to_json(g, &err);
    /* shortest exact floats; one operator per line; inputs-less ops without "inputs" */
    assert_null(strstr(text, "1.0000000000000001e-05"));
    /* jansson 2.14 writes 1e-5, older ones 1e-05 */
    assert_true(strstr(text, "\"eps\": 1e-5,") || strstr(text, "\"eps\": 1e-05,"));
    assert_non_null(strstr(text, "\"p\": 0.30000000000000004}"));
    assert_non_null(
        strstr(text, "\n    {\"name\": \"x\", \"type\": \"input\", \"shape\": [8, 3, 32, 32], "
                     "\"is_index\": false},\n"));
    assert_non_null(strstr(text, "\"mode\": \"adaptive_avg\""));
    assert_non_null(strstr(text, "\"name\": \"cnn \\\"quoted\\\"\""));
    assert_true(strncmp(text, "{\n  \"format\": \"soapflow-model\",\n  \"version\": 1,\n", 48) ==
                0);
    free(text);
    sf_graph_free(g);
}

static void test_round_trip_seq(void **state) {
    (void)state;
    sf_graph *g = build_seq();
    assert_round_trip(g, "seq.json");
    sf_error err = {0};
    char *text = sf_model_to_json(g, &err);
    assert_non_null(strstr(text,
                           "\"inputs\": [\"split0:1\", \"l0.t0:1\", \"l0.t0:2\"], \"hidden\": 16, "
                           "\"share_weights\": \"l0.t0\"}"));
    assert_non_null(strstr(text,
                           "\"inputs\": [\"split0:2\", \"l0.t1:1\", \"l0.t1:2\"], \"hidden\": 16, "
                           "\"share_weights\": \"l0.t0\"}"));
    assert_non_null(strstr(text, "\"is_index\": true"));
    assert_non_null(strstr(text, "\"parts\": 2, \"sizes\": [100, 44]"));
    assert_non_null(strstr(text, "\"shape\": [0, -1]"));
    free(text);
    sf_graph_free(g);
}

/* Names holding ':' stay unambiguous: "s:1" is an operator of its own here, so its
 * consumer must say "s:1:0", while output 1 of "s" is written "s:1". */
static void test_round_trip_colon_names(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("colons");
    sf_error err = {0};
    sf_shape s = sf_shape_make(2, (int64_t[]){4, 6});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p = defaults(SF_OP_SPLIT);
    p.split.axis = 1;
    p.split.parts = 2;
    int sp = add1(g, SF_OP_SPLIT, "s", &p, x);
    p = defaults(SF_OP_RELU);
    int r = add(g, SF_OP_RELU, "s:1", &p, (sf_tensor_ref[]){{sp, 0}}, 1);
    p = defaults(SF_OP_ADD);
    add(g, SF_OP_ADD, "sum", &p, (sf_tensor_ref[]){{r, 0}, {sp, 1}}, 2);
    p = defaults(SF_OP_RELU);
    add(g, SF_OP_RELU, "odd:7", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    add(g, SF_OP_RELU, "after", &p, (sf_tensor_ref[]){{4, 0}}, 1);
    assert_round_trip(g, "colons.json");
    char *text = sf_model_to_json(g, &err);
    assert_non_null(strstr(text, "\"inputs\": [\"s:1:0\", \"s:1\"]"));
    assert_non_null(strstr(text, "\"inputs\": [\"odd:7\"]"));
    free(text);
    sf_graph_free(g);
}

/* A model without operators has nothing to plan: the writer does not write one
 * (the reader would refuse it back), and nothing is left at the path. */
static void test_empty_graph_not_written(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("empty");
    sf_error err = {0};
    assert_null(sf_model_to_json(g, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no operators"));
    char path[256];
    tmp_path(path, sizeof path, "empty_graph.json");
    remove(path);
    sf_error e2 = {0};
    assert_int_equal(sf_model_save_json(g, path, &e2), SF_ERR_INVALID);
    assert_non_null(strstr(e2.msg, path));
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    assert_null(f);
    sf_graph_free(g);
}

/* Hand-written files: defaults fill what is missing, "inputs" may be empty, any
 * whitespace, keys in any order. */
static void test_read_defaults_and_layout(void **state) {
    (void)state;
    const char *text = "{\"ops\":[{\"type\":\"input\",\"name\":\"x\",\"shape\":[2,3,8,8]},\n"
                       "{\"name\":\"c\",\"type\":\"conv2d\",\"out_channels\":4,\"inputs\":[\"x\"]},"
                       "{\"name\":\"r\",\"type\":\"relu\",\"inputs\":[\"c:0\"]}],"
                       "\"version\":1,\"format\":\"soapflow-model\"}";
    sf_error err = {0};
    sf_graph *g = sf_model_parse_json(text, "inline", &err);
    if (!g) fail_msg("%s", err.msg);
    assert_string_equal(sf_graph_name(g), "model");
    const sf_op *c = sf_graph_op(g, 1);
    sf_op_params d = defaults(SF_OP_CONV2D);
    assert_int_equal(c->params.conv2d.kernel[0], d.conv2d.kernel[0]);
    assert_int_equal(c->params.conv2d.stride[1], d.conv2d.stride[1]);
    assert_int_equal(c->params.conv2d.bias, d.conv2d.bias);
    assert_int_equal(c->params.conv2d.out_channels, 4);
    assert_int_equal(sf_graph_op(g, 2)->inputs[0].op, 1);
    assert_int_equal(sf_graph_op(g, 0)->params.input.is_index, 0);
    sf_graph_free(g);
}

/* ---- tests: errors ------------------------------------------------------- */

/* Load `text` from file `file`, expect `status` and every needle in the message. */
static void expect_error(const char *file, const char *text, sf_status status, ...) {
    write_text(file, text);
    char path[256];
    tmp_path(path, sizeof path, file);
    sf_error err = {0};
    sf_graph *g = sf_model_load_json(path, &err);
    if (g) fail_msg("%s: loaded, expected an error", file);
    if (err.code != status)
        fail_msg("%s: status %d (%s), expected %d: %s", file, err.code, sf_status_str(err.code),
                 status, err.msg);
    va_list ap;
    va_start(ap, status);
    for (const char *needle; (needle = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.msg, needle)) fail_msg("%s: '%s' not in: %s", file, needle, err.msg);
    va_end(ap);
}

/* Lines 1-5 of a valid model; the case's operator goes on line 6. */
#define HEAD                                                                                       \
    "{\n"                                                                                          \
    "  \"format\": \"soapflow-model\", \"version\": 1, \"name\": \"t\",\n"                         \
    "  \"ops\": [\n"                                                                               \
    "    {\"name\": \"x\", \"type\": \"input\", \"shape\": [4, 3, 8, 8]},\n"                       \
    "    {\"name\": \"c1\", \"type\": \"conv2d\", \"inputs\": [\"x\"], \"out_channels\": 4},\n"
#define TAIL "\n  ]\n}\n"

static void test_error_syntax(void **state) {
    (void)state;
    expect_error("syntax.json",
                 "{\n  \"format\": \"soapflow-model\",\n  \"version\": 1\n  \"ops\": []\n}\n",
                 SF_ERR_PARSE, "syntax.json:4:", NULL);
    expect_error("syntax3.json", "{\"format\": \"soapflow-model\",\n\"version\": 1,\n\"ops\": [}\n",
                 SF_ERR_PARSE, "syntax3.json:3:", NULL);
    expect_error("dupkey.json",
                 HEAD "    {\"name\": \"r\", \"type\": \"relu\", \"name\": \"q\"}" TAIL,
                 SF_ERR_PARSE, "dupkey.json:6:", "duplicate", NULL);
    expect_error("bigint.json",
                 HEAD "    {\"name\": \"fc\", \"type\": \"linear\", \"inputs\": [\"c1\"], "
                      "\"out_features\": 99999999999999999999999}" TAIL,
                 SF_ERR_PARSE, "bigint.json:6:", NULL);
}

static void test_error_operator_messages(void **state) {
    (void)state;
    expect_error("type.json",
                 HEAD "    {\"name\": \"fc1\", \"type\": \"linaer\", \"inputs\": [\"c1\"]}" TAIL,
                 SF_ERR_NOTFOUND, "type.json:6:", "'fc1'", "unknown operator type 'linaer'", NULL);
    /* the column points at the unknown key */
    expect_error("attr.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"kernal\": [3, 3]}" TAIL,
                 SF_ERR_PARSE, "attr.json:6:56: operator 'c2' (conv2d): unknown attribute 'kernal'",
                 NULL);
    expect_error(
        "kernel.json",
        HEAD
        "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], \"kernel\": 3}" TAIL,
        SF_ERR_PARSE, "kernel.json:6:", "'c2' (conv2d)",
        "attribute 'kernel' must be an array of 2 integers", NULL);
    expect_error("kernel3.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"kernel\": [3, 3, 3]}" TAIL,
                 SF_ERR_PARSE, "kernel3.json:6:", "must be an array of 2 integers", NULL);
    expect_error(
        "bool.json",
        HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], \"bias\": 1}" TAIL,
        SF_ERR_PARSE, "bool.json:6:", "'c2'", "attribute 'bias' must be true or false", NULL);
    expect_error("int.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"out_channels\": 4.5}" TAIL,
                 SF_ERR_PARSE, "int.json:6:", "attribute 'out_channels' must be an integer", NULL);
    expect_error(
        "float.json",
        HEAD
        "    {\"name\": \"d\", \"type\": \"dropout\", \"inputs\": [\"c1\"], \"p\": \"half\"}" TAIL,
        SF_ERR_PARSE, "float.json:6:", "'d' (dropout)", "attribute 'p' must be a number", NULL);
    expect_error(
        "enum.json",
        HEAD
        "    {\"name\": \"p\", \"type\": \"pool2d\", \"inputs\": [\"c1\"], \"mode\": \"min\"}" TAIL,
        SF_ERR_PARSE, "enum.json:6:", "'p' (pool2d)", "\"max\"", "\"adaptive_avg\"", NULL);
    expect_error("range.json",
                 HEAD "    {\"name\": \"f\", \"type\": \"flatten\", \"inputs\": [\"c1\"], "
                      "\"start_dim\": 4294967296}" TAIL,
                 SF_ERR_RANGE, "range.json:6:", "'f' (flatten)", "out of range", NULL);
    expect_error(
        "vshape.json",
        HEAD "    {\"name\": \"y\", \"type\": \"input\", \"shape\": [1, 2, 3, 4, 5, 6, 7]}" TAIL,
        SF_ERR_PARSE, "vshape.json:6:", "'y' (input)", "at most 6 integers", NULL);
    expect_error("parts.json",
                 HEAD
                 "    {\"name\": \"s\", \"type\": \"split\", \"inputs\": [\"c1\"], \"axis\": 1, "
                 "\"parts\": 3, \"sizes\": [2, 2]}" TAIL,
                 SF_ERR_INVALID, "parts.json:6:", "'s' (split)", "'sizes' has 2 elements", NULL);
}

static void test_error_graph_messages(void **state) {
    (void)state;
    expect_error("input.json",
                 HEAD "    {\"name\": \"fc1\", \"type\": \"linear\", \"inputs\": [\"c0\"], "
                      "\"out_features\": 3}" TAIL,
                 SF_ERR_NOTFOUND, "input.json:6:", "'fc1' (linear)", "unknown input 'c0'", NULL);
    expect_error("later.json",
                 HEAD "    {\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"q\"]},\n"
                      "    {\"name\": \"q\", \"type\": \"relu\", \"inputs\": [\"c1\"]}" TAIL,
                 SF_ERR_INVALID, "later.json:6:", "'r' (relu)", "listed later", NULL);
    expect_error("outidx.json",
                 HEAD "    {\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"c1:2\"]}" TAIL,
                 SF_ERR_INVALID, "outidx.json:6:46:", "'r' (relu)", "output 2 of 'c1', which has 1",
                 NULL);
    expect_error("outbig.json",
                 HEAD
                 "    {\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"c1:99999999999\"]}" TAIL,
                 SF_ERR_RANGE, "outbig.json:6:", "'r' (relu)", "out of range", NULL);
    expect_error("dup.json",
                 HEAD "    {\"name\": \"c1\", \"type\": \"relu\", \"inputs\": [\"x\"]}" TAIL,
                 SF_ERR_INVALID, "dup.json:6:", "'c1' (relu)", "already used", "line 5", NULL);
    expect_error("shape.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"out_channels\": 4, \"kernel\": [11, 11]}" TAIL,
                 SF_ERR_SHAPE, "shape.json:6:", "operator 'c2' (conv2d): kernel", NULL);
    expect_error("arity.json",
                 HEAD "    {\"name\": \"a\", \"type\": \"add\", \"inputs\": [\"c1\"]}" TAIL,
                 SF_ERR_INVALID, "arity.json:6:", "'a' (add)", NULL);
    expect_error("share.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"out_channels\": 4, \"share_weights\": \"nope\"}" TAIL,
                 SF_ERR_NOTFOUND, "share.json:6:", "'c2' (conv2d)", "unknown operator 'nope'",
                 NULL);
    expect_error("share2.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"out_channels\": 8, \"share_weights\": \"c1\"}" TAIL,
                 SF_ERR_INVALID, "share2.json:6:", "'c2' (conv2d)", "cannot share weights", NULL);
    expect_error("noname.json", HEAD "    {\"type\": \"relu\", \"inputs\": [\"c1\"]}" TAIL,
                 SF_ERR_PARSE, "noname.json:6:", "operator #2", "missing \"name\"", NULL);
    expect_error("notobj.json", HEAD "    [1, 2]" TAIL, SF_ERR_PARSE,
                 "notobj.json:6:5:", "operator #2", NULL);
    expect_error("inputs.json",
                 HEAD "    {\"name\": \"r\", \"type\": \"relu\", \"inputs\": \"c1\"}" TAIL,
                 SF_ERR_PARSE, "inputs.json:6:", "'r' (relu)", "\"inputs\" must be an array", NULL);
}

/* Sizes that would overflow int64 arithmetic in shape inference, costs or
 * parameter counts are refused by name (SF_MAX_EXTENT, SF_MAX_NUMEL), never
 * computed (they were signed overflows under UBSan). */
static void test_error_size_limits(void **state) {
    (void)state;
    expect_error("bigdim.json",
                 HEAD "    {\"name\": \"y\", \"type\": \"input\", "
                      "\"shape\": [9223372036854775807, 784]}" TAIL,
                 SF_ERR_RANGE, "bigdim.json:6:", "'y' (input)", "attribute 'shape'", NULL);
    expect_error("bigattr.json",
                 HEAD "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"c1\"], "
                      "\"out_channels\": 4, \"padding\": [4611686018427387904, 1]}" TAIL,
                 SF_ERR_RANGE, "bigattr.json:6:", "'c2' (conv2d)", "attribute 'padding'", NULL);
    /* every dimension within SF_MAX_EXTENT, the element count beyond SF_MAX_NUMEL */
    expect_error("numel.json",
                 HEAD "    {\"name\": \"y\", \"type\": \"input\", "
                      "\"shape\": [1024, 1024, 1024, 2048]}" TAIL,
                 SF_ERR_RANGE, "numel.json:6:", "'y' (input)", "1024x1024x1024x2048", "limit",
                 NULL);
    expect_error("flat.json",
                 HEAD "    {\"name\": \"y\", \"type\": \"input\", "
                      "\"shape\": [1, 65536, 65536, 16]},\n"
                      "    {\"name\": \"f\", \"type\": \"flatten\", \"inputs\": [\"y\"]}" TAIL,
                 SF_ERR_RANGE, "flat.json:7:", "'f' (flatten)", "output 0", NULL);
    /* tensors within the limits, weights not: 2^31 x 2^20 x 2^10 x 2^10 */
    expect_error("weights.json",
                 HEAD "    {\"name\": \"y\", \"type\": \"input\", "
                      "\"shape\": [1, 1048576, 1024, 1024]},\n"
                      "    {\"name\": \"c2\", \"type\": \"conv2d\", \"inputs\": [\"y\"], "
                      "\"out_channels\": 2147483648, \"kernel\": [1024, 1024]}" TAIL,
                 SF_ERR_RANGE, "weights.json:7:", "'c2' (conv2d)", "weights", NULL);
    expect_error("lstm.json",
                 HEAD "    {\"name\": \"y\", \"type\": \"input\", \"shape\": [1, 1, 8]},\n"
                      "    {\"name\": \"l\", \"type\": \"lstm\", \"inputs\": [\"y\"], "
                      "\"hidden\": 2147483648}" TAIL,
                 SF_ERR_RANGE, "lstm.json:7:", "'l' (lstm)", NULL);
}

static void test_error_file_level(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "missing.json");
    sf_error err = {0};
    assert_null(sf_model_load_json(path, &err));
    assert_int_equal(err.code, SF_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.json"));

    expect_error("empty.json", "", SF_ERR_PARSE, "empty.json", "empty", NULL);
    expect_error("blank.json", "  \n\n ", SF_ERR_PARSE, "blank.json", "empty", NULL);
    expect_error("array.json", "\n  [1, 2]\n", SF_ERR_PARSE, "array.json:2:3:", "object", NULL);
    expect_error("format.json", "{\n  \"format\": \"onnx\", \"version\": 1, \"ops\": []}",
                 SF_ERR_PARSE, "format.json:2:3:", "soapflow-model", NULL);
    expect_error("noformat.json", "{\"version\": 1, \"ops\": []}", SF_ERR_PARSE,
                 "noformat.json:1:1:", "\"format\"", NULL);
    expect_error("version.json", "{\"format\": \"soapflow-model\",\n\"version\": 2, \"ops\": []}",
                 SF_ERR_UNSUPPORTED, "version.json:2:1:", "version 2", NULL);
    expect_error("noops.json", "{\"format\": \"soapflow-model\", \"version\": 1}", SF_ERR_PARSE,
                 "noops.json:1:1:", "missing \"ops\"", NULL);
    expect_error("opsobj.json", "{\"format\": \"soapflow-model\", \"version\": 1,\n \"ops\": {}}",
                 SF_ERR_PARSE, "opsobj.json:2:2:", "\"ops\" must be an array", NULL);
    /* "ops": [] names the file and where "ops" is: every command refuses it alike */
    expect_error("noopsleft.json",
                 "{\"format\": \"soapflow-model\", \"version\": 1,\n \"ops\": []}", SF_ERR_INVALID,
                 "noopsleft.json:2:2:", "\"ops\" is empty", "at least one operator", NULL);
    expect_error("extra.json",
                 "{\"format\": \"soapflow-model\", \"version\": 1, \"ops\": [],\n"
                 "  \"batch\": 3}",
                 SF_ERR_PARSE, "extra.json:2:3:", "unknown field 'batch'", NULL);
}

/* Every prefix of a valid file fails cleanly (never crashes, always names the file), and a
 * byte flipped anywhere either loads or fails with a message. */
static void test_error_robust_on_damaged_text(void **state) {
    (void)state;
    sf_graph *g = build_seq();
    sf_error err = {0};
    char *text = sf_model_to_json(g, &err);
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    for (size_t k = 0; k < n - 2; k++) {
        memcpy(buf, text, k);
        buf[k] = '\0';
        sf_error e = {0};
        sf_graph *h = sf_model_parse_json(buf, "cut.json", &e);
        assert_null(h);
        assert_non_null(strstr(e.msg, "cut.json"));
    }
    const char flips[] = {'"', '{', '}', '[', ']', ',', ':', '\\', 'x', '1', ' '};
    for (size_t k = 0; k < n; k += 3) {
        memcpy(buf, text, n + 1);
        buf[k] = flips[k % sizeof flips];
        sf_error e = {0};
        sf_graph *h = sf_model_parse_json(buf, "flip.json", &e);
        if (h)
            sf_graph_free(h);
        else
            assert_non_null(strstr(e.msg, "flip.json"));
    }
    free(buf);
    free(text);
    sf_graph_free(g);
}

/* A long model: 20,000 operators in a chain, each reading the one before by
 * name, then a name used twice. Names are found through the graph's hash index
 * (a linear search per name made reading quadratic: 50,000 operators took 13
 * s), which grows several times on the way; every name must still be found,
 * and the duplicate caught at the end. */
static void test_read_long_chain(void **state) {
    (void)state;
    enum { N = 20000 };
    sf_strbuf b = {0};
    sf_strbuf_puts(&b, "{\"format\": \"soapflow-model\", \"version\": 1, \"ops\": [\n"
                       "{\"name\": \"r0\", \"type\": \"input\", \"shape\": [2, 3]}");
    for (int i = 1; i < N; i++)
        sf_strbuf_printf(&b, ",\n{\"name\": \"r%d\", \"type\": \"relu\", \"inputs\": [\"r%d\"]}", i,
                         i - 1);
    size_t body = b.len;
    sf_strbuf_puts(&b, "\n]}\n");
    char *text = sf_strbuf_take(&b);
    assert_non_null(text);
    sf_error err = {0};
    sf_graph *g = sf_model_parse_json(text, "long.json", &err);
    assert_non_null(g);
    assert_int_equal(sf_graph_num_ops(g), N);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "r%d", i);
        assert_int_equal(sf_graph_find(g, name), i);
    }
    assert_int_equal(sf_graph_find(g, "r"), -1);
    assert_int_equal(sf_graph_find(g, "r20000"), -1);
    assert_int_equal(sf_graph_find(g, ""), -1);
    sf_graph_free(g);
    text[body] = '\0';
    sf_strbuf_puts(&b, text);
    free(text);
    sf_strbuf_puts(&b, ",\n{\"name\": \"r7\", \"type\": \"relu\", \"inputs\": [\"r9\"]}\n]}\n");
    text = sf_strbuf_take(&b);
    sf_error_clear(&err);
    assert_null(sf_model_parse_json(text, "long.json", &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'r7'"));
    free(text);
    sf_graph *empty = sf_graph_new("e");
    assert_int_equal(sf_graph_find(empty, "r0"), -1);
    sf_graph_free(empty);
}

static void test_write_errors(void **state) {
    (void)state;
    sf_graph *g = build_cnn();
    sf_error err = {0};
    assert_int_equal(sf_model_save_json(g, "/nonexistent-dir/m.json", &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/m.json"));
    sf_graph_free(g);
}

/* ---- DOT ------------------------------------------------------------------ */

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_dot(void **state) {
    (void)state;
    sf_graph *g = build_seq();
    int n = sf_graph_num_ops(g), edges = 0;
    const char **labels = calloc((size_t)n, sizeof *labels);
    const char **colors = calloc((size_t)n, sizeof *colors);
    labels[3] = "n=2 h=2";
    colors[3] = "#aabbcc";
    sf_error err = {0};
    char *dot = sf_graph_to_dot(g, labels, colors, &err);
    assert_non_null(dot);
    assert_true(strncmp(dot, "digraph \"seq\" {\n", 16) == 0);
    assert_non_null(strstr(dot, "rankdir=TB"));
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        char node[256];
        snprintf(node, sizeof node, "  n%d [label=\"%s\\n%s\\n", i, op->name,
                 sf_op_type_name(op->type));
        if (!strstr(dot, node)) fail_msg("no node line for '%s'", op->name);
        for (int k = 0; k < op->n_inputs; k++) {
            char edge[64];
            snprintf(edge, sizeof edge, "  n%d -> n%d [label=\"", op->inputs[k].op, i);
            assert_non_null(strstr(dot, edge));
            edges++;
        }
    }
    assert_int_equal(count(dot, " -> "), edges);
    assert_non_null(
        strstr(dot, "\"l0.t0\\nlstm\\n8x4x16, 8x16, 8x16\\nn=2 h=2\", fillcolor=\"#aabbcc\"]"));
    assert_non_null(strstr(dot, "n0 -> n1 [label=\"8x12\"]"));
    assert_non_null(strstr(dot, "n3 -> n4 [label=\"1: 8x16\"]"));
    assert_int_equal(count(dot, "fillcolor=\"#aabbcc\""), 1);
    free(dot);

    char path[256];
    tmp_path(path, sizeof path, "seq.dot");
    assert_int_equal(sf_graph_write_dot(g, path, NULL, NULL, &err), SF_OK);
    size_t len;
    char *disk = sf_read_file(path, &len, &err);
    assert_non_null(disk);
    assert_null(strstr(disk, "#aabbcc"));
    assert_int_equal(count(disk, " -> "), edges);
    free(disk);
    free(labels);
    free(colors);
    sf_graph_free(g);
}

static void test_dot_escapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("a\"b");
    sf_error err = {0};
    sf_shape s = sf_shape_make(2, (int64_t[]){2, 3});
    int x = sf_graph_add_input(g, "we\"ird\\name", &s, 0, &err);
    sf_op_params p = defaults(SF_OP_RELU);
    add1(g, SF_OP_RELU, "r", &p, x);
    const char *labels[] = {"say \"hi\"\nthere", NULL};
    char *dot = sf_graph_to_dot(g, labels, NULL, &err);
    assert_non_null(dot);
    assert_non_null(strstr(dot, "digraph \"a\\\"b\""));
    assert_non_null(
        strstr(dot, "[label=\"we\\\"ird\\\\name\\ninput\\n2x3\\nsay \\\"hi\\\"\\nthere\"]"));
    assert_null(strstr(dot, "we\"ird"));
    free(dot);
    sf_graph_free(g);
}

/* Every zoo model at batch 8 survives save and load exactly. */
static void test_round_trip_zoo(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 8;
    for (int i = 0; i < sf_model_count(); i++) {
        sf_error err = {0};
        sf_graph *g = sf_model_build(sf_model_name(i), &o, &err);
        if (!g) fail_msg("building %s: %s", sf_model_name(i), err.msg);
        char file[64];
        snprintf(file, sizeof file, "zoo_%s.json", sf_model_name(i));
        assert_round_trip(g, file);
        sf_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attr_tables_are_sound),
        cmocka_unit_test(test_round_trip_cnn),
        cmocka_unit_test(test_round_trip_seq),
        cmocka_unit_test(test_round_trip_colon_names),
        cmocka_unit_test(test_empty_graph_not_written),
        cmocka_unit_test(test_round_trip_zoo),
        cmocka_unit_test(test_read_defaults_and_layout),
        cmocka_unit_test(test_error_syntax),
        cmocka_unit_test(test_error_operator_messages),
        cmocka_unit_test(test_error_graph_messages),
        cmocka_unit_test(test_error_size_limits),
        cmocka_unit_test(test_error_file_level),
        cmocka_unit_test(test_error_robust_on_damaged_text),
        cmocka_unit_test(test_read_long_chain),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_dot_escapes),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
