/*
 * make_corpus.c - writes the seed corpora of the harnesses (README.md):
 *
 *     build-fuzz/make_corpus fuzz/corpus
 *
 * Seeds are small valid files as soapflow's own writers write them, so that
 * the fuzzer starts from inputs that reach deep into each reader: zoo models
 * at tiny sizes, every machine preset, the baseline and random strategies of
 * the strategy harness's models (lenet5 on p100-4x4, nmt on k80-16x4), costs
 * files of real profile keys (timed by the analytic model, so the files are
 * the same on every run), IDX files plain and gzipped, and safetensors
 * checkpoints.
 * Hand-written seeds (docs examples, a model with the operator types no small
 * zoo model has) sit beside them in fuzz/corpus/ and are not touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/safetensors.h"
#include "soapflow/strategy.h"

static const char *root;
static sf_error err;

static void die(const char *what) {
    fprintf(stderr, "make_corpus: %s: %s\n", what, err.msg);
    exit(1);
}

static void put(const char *dir, const char *name, const void *data, size_t len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    if (sf_write_file_atomic(path, data, len, &err) != SF_OK) die(path);
}

static void put_text(const char *dir, const char *name, char *text) {
    if (!text) die(name);
    put(dir, name, text, strlen(text));
    free(text);
}

static sf_graph *model(const char *name, int64_t batch, int64_t seq, int64_t hidden,
                       int64_t vocab) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.seq_len = seq;
    o.chunk = seq ? 2 : 0;
    o.hidden = hidden;
    o.vocab = vocab;
    if (!strcmp(name, "mlp")) {
        o.n_mlp = 3;
        o.mlp_sizes[0] = 16;
        o.mlp_sizes[1] = 8;
        o.mlp_sizes[2] = 4;
    }
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) die(name);
    return g;
}

static void models(void) {
    struct {
        const char *name;
        int64_t batch, seq, hidden, vocab;
    } zoo[] = {{"lenet5", 8, 0, 0, 0},
               {"mlp", 4, 0, 0, 0},
               {"rnntc", 4, 4, 8, 16},
               {"rnnlm", 4, 4, 8, 16},
               {"nmt", 4, 4, 8, 16}};
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        sf_graph *g = model(zoo[i].name, zoo[i].batch, zoo[i].seq, zoo[i].hidden, zoo[i].vocab);
        char name[64];
        snprintf(name, sizeof name, "%s.json", zoo[i].name);
        put_text("model_json", name, sf_model_to_json(g, &err));
        sf_graph_free(g);
    }
}

static void machines(void) {
    for (int i = 0; i < sf_machine_preset_count(); i++) {
        sf_machine_desc d;
        if (sf_machine_preset_desc(sf_machine_preset_name(i), &d, &err) != SF_OK) die("preset");
        char name[64];
        snprintf(name, sizeof name, "%s.json", sf_machine_preset_name(i));
        put_text("machine_json", name, sf_machine_desc_to_json(&d, &err));
    }
}

/* The baselines and two random strategies of g on machine, as PREFIX_NAME.json. */
static void strategies_of(sf_graph *g, const char *machine, const char *prefix) {
    sf_machine *m = sf_machine_preset(machine, &err);
    sf_strategy *s = sf_strategy_new(g);
    if (!m || !s) die("strategies");
    const char *names[] = {"data", "model", "owt", "expert", "single"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (sf_strategy_baseline(s, names[i], g, m, &err) != SF_OK) die(names[i]);
        char name[64];
        snprintf(name, sizeof name, "%s_%s.json", prefix, names[i]);
        put_text("strategy_json", name, sf_strategy_to_json_for(s, g, m, &err));
    }
    /* random configs: splits on several dimensions, scattered devices */
    sf_rng rng;
    sf_rng_seed(&rng, 1);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            sf_config_random(sf_graph_op(g, i), m, &rng, sf_strategy_config(s, i));
        char name[64];
        snprintf(name, sizeof name, "%s_random%d.json", prefix, k);
        put_text("strategy_json", name, sf_strategy_to_json_for(s, g, m, &err));
    }
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* The two contexts of fuzz_strategy_json.c. */
static void strategies(void) {
    strategies_of(model("lenet5", 8, 0, 0, 0), "p100-4x4", "lenet5");
    strategies_of(model("nmt", 4, 4, 8, 16), "k80-16x4", "nmt");
}

/* A costs file of the keys of one baseline of a model, timed analytically. */
static void costs_of(const char *model_name, const char *baseline, int devices, const char *file) {
    sf_graph *g = model(model_name, 8, 0, 0, 0);
    char preset[32];
    snprintf(preset, sizeof preset, "cpu");
    sf_machine *full = sf_machine_preset(preset, &err);
    sf_machine *m = full ? sf_machine_subset(full, devices, &err) : NULL;
    sf_strategy *s = sf_strategy_new(g);
    sf_cost_model *cm = m ? sf_cost_analytic_new(m, NULL) : NULL;
    sf_profile_db *db = m ? sf_profile_db_new(sf_machine_device_kind(m, 0)->name) : NULL;
    if (!cm || !s || !db || sf_strategy_baseline(s, baseline, g, m, &err) != SF_OK) die(file);
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        const sf_config *c = sf_strategy_get(s, i);
        if (op->type == SF_OP_INPUT) continue;
        for (int p = 0; p < c->n_parts; p++) {
            sf_tile t;
            char key[SF_PROFILE_KEY_MAX];
            sf_config_part_tile(op, c, p, &t);
            if (!sf_profile_key(op, &t, key, sizeof key)) die("key");
            double fwd = sf_cost_task_s(cm, op, &t, 0, SF_PASS_FWD);
            double bwd = sf_cost_task_s(cm, op, &t, 0, SF_PASS_BWD);
            if (sf_profile_db_insert(db, key, op->type, fwd, bwd, 10, &err) != SF_OK) die(key);
        }
    }
    put_text("costs_json", file, sf_profile_db_to_json(db, &err));
    sf_profile_db_free(db);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_machine_free(full);
    sf_graph_free(g);
}

static void costs(void) {
    costs_of("lenet5", "single", 1, "lenet5_single.json");
    costs_of("mlp", "data", 2, "mlp_data2.json");
    /* an empty database */
    sf_profile_db *db = sf_profile_db_new("cpu-rank");
    if (!db) die("costs");
    put_text("costs_json", "empty.json", sf_profile_db_to_json(db, &err));
    sf_profile_db_free(db);
}

/* The bytes of an IDX file of dims, data a ramp (malloc'd, *len bytes). */
static unsigned char *idx_bytes(int ndim, const uint32_t *dims, size_t *len) {
    size_t data = 1;
    for (int i = 0; i < ndim; i++) data *= dims[i];
    size_t hdr = 4 + 4 * (size_t)ndim;
    unsigned char *b = malloc(hdr + data + 1);
    if (!b) die("idx");
    b[0] = b[1] = 0;
    b[2] = 0x08;
    b[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 0; k < 4; k++) b[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
    for (size_t i = 0; i < data; i++) b[hdr + i] = (unsigned char)(i * 37 % 256);
    *len = hdr + data;
    return b;
}

static void put_gz(const char *dir, const char *name, const unsigned char *b, size_t len) {
    z_stream z = {0};
    if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("zlib");
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    unsigned char *out = malloc(cap);
    if (!out) die("zlib");
    z.next_in = (unsigned char *)b;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) die("deflate");
    put(dir, name, out, cap - z.avail_out);
    deflateEnd(&z);
    free(out);
}

static void idx(void) {
    struct {
        const char *name;
        int ndim;
        uint32_t dims[3];
    } files[] = {{"labels-idx1", 1, {10}},
                 {"images-idx3", 3, {2, 5, 4}},
                 {"empty-idx3", 3, {0, 28, 28}},
                 {"matrix-idx2", 2, {3, 7}}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len;
        unsigned char *b = idx_bytes(files[i].ndim, files[i].dims, &len);
        char name[64];
        put("idx", files[i].name, b, len);
        snprintf(name, sizeof name, "%s.gz", files[i].name);
        put_gz("idx", name, b, len);
        free(b);
    }
}

static void put_st(const char *name, const sf_st_tensor *t, size_t n, const char *const *keys,
                   const char *const *values, size_t nm) {
    char *out;
    size_t len;
    if (sf_safetensors_encode(t, n, keys, values, nm, &out, &len, &err) != SF_OK) die(name);
    put("safetensors", name, out, len);
    free(out);
}

static void safetensors(void) {
    float w[12], b[3] = {0.5f, -1.0f, 2.0f}, s = 3.25f;
    for (int i = 0; i < 12; i++) w[i] = (float)i / 4.0f - 1.0f;
    sf_st_tensor two[2] = {{.name = "fc.weight", .ndim = 2, .shape = {3, 4}, .data = w},
                           {.name = "fc.bias", .ndim = 1, .shape = {3}, .data = b}};
    const char *keys[] = {"step", "model"}, *values[] = {"1200", "lenet5"};
    put_st("two_tensors_meta.safetensors", two, 2, keys, values, 2);
    put_st("two_tensors.safetensors", two, 2, NULL, NULL, 0);
    sf_st_tensor odd[3] = {{.name = "scalar", .ndim = 0, .data = &s},
                           {.name = "empty", .ndim = 2, .shape = {0, 5}},
                           {.name = "conv.weight", .ndim = 4, .shape = {1, 1, 2, 2}, .data = w}};
    put_st("scalar_empty_4d.safetensors", odd, 3, NULL, NULL, 0);
    put_st("meta_only.safetensors", NULL, 0, keys, values, 1);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus DIR (fuzz/corpus)\n");
        return 2;
    }
    root = argv[1];
    models();
    machines();
    strategies();
    costs();
    idx();
    safetensors();
    return 0;
}
