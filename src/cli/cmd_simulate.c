/*
 * cmd_simulate.c - `soapflow simulate`: the time, traffic and memory of one
 * training iteration of a model on a machine under a strategy, as FlexFlow's
 * execution simulator predicts them; and the helpers every planning command
 * shares (a model from the command line, a strategy by name or file).
 *
 * The strategy is a baseline name or a strategy JSON file, so that a strategy
 * a search wrote can be checked, drawn and compared with the baselines by the
 * same command. The cost model is the analytic roofline, or with --costs the
 * profiled model over a costs file (misses fall back to the roofline, and a
 * warning names their operator types). Files asked for (--trace, --svg, --dot,
 * --save-strategy) are checked before any work and written together before
 * anything is printed, as `graph` and `search` do: a failure shows as one
 * error line and a non-zero status rather than after a full report, and
 * replaces none of the files already there. A strategy that does not fit in memory is a result,
 * not an error: it is reported ("fits": false) and the status stays 0.
 */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"

#define DEFAULT_MACHINE "p100-4x4"
#define DEFAULT_STRATEGY "data"
#define MAX_BATCH ((int64_t)1 << 40)
#define MAX_SIZE ((int64_t)1 << 40)

/* ---- shared: the model options --------------------------------------------- */

#define MODEL_SIZE_HELP                                                                            \
    "  --seq-len N            RNN unrolled steps / transformer sequence length\n"                  \
    "  --chunk N              RNN time steps per operator\n"                                       \
    "  --hidden N             RNN hidden and embedding size / transformer width\n"                 \
    "  --vocab N              vocabulary size\n"                                                   \
    "  --layers N             gpt: transformer blocks; nmt: LSTM layers a side\n"                  \
    "  --heads N              gpt: attention heads (dividing --hidden)\n"                          \
    "  --mlp-sizes A,B,...    mlp: input, hidden..., classes (e.g. 784,4096,10)\n"

#define MODEL_NAME_HELP                                                                            \
    "  -m, --model NAME|FILE  a zoo model (see 'soapflow models'), a model JSON file, or an\n"     \
    "                         ONNX file (.onnx)\n"                                                 \
    "  -b, --batch N          global batch of a zoo model or of an ONNX file's dynamic batch\n"    \
    "                         dimension (default: 64 per device)\n"                             \
    "  --onnx-buffers FILE    an ONNX file's registered buffers: a JSON array of initializer\n"   \
    "                         names held fixed, not learned (default: <model>.buffers.json\n"    \
    "                         beside the model when there is one)\n"

const char sf_cli_model_help[] = MODEL_NAME_HELP MODEL_SIZE_HELP;
const char sf_cli_model_size_help[] = MODEL_SIZE_HELP;

int sf_cli_model_option(sf_cli_args *a, sf_cli_model_opts *o) {
    return sf_cli_str(a, "--model", "-m", &o->model) ||
           sf_cli_int(a, "--batch", "-b", 1, MAX_BATCH, &o->batch) ||
           sf_cli_int(a, "--seq-len", NULL, 1, MAX_SIZE, &o->seq_len) ||
           sf_cli_int(a, "--chunk", NULL, 1, MAX_SIZE, &o->chunk) ||
           sf_cli_int(a, "--hidden", NULL, 1, MAX_SIZE, &o->hidden) ||
           sf_cli_int(a, "--vocab", NULL, 1, MAX_SIZE, &o->vocab) ||
           sf_cli_int(a, "--layers", NULL, 1, 100000, &o->layers) ||
           sf_cli_int(a, "--heads", NULL, 1, MAX_SIZE, &o->heads) ||
           sf_cli_str(a, "--mlp-sizes", NULL, &o->mlp_sizes) ||
           sf_cli_str(a, "--onnx-buffers", NULL, &o->onnx_buffers);
}

/* "784,4096,10"; an empty item ("10,,5") is an error, not skipped. */
static int parse_mlp_sizes(const char *cmd, const char *text, sf_model_options *mo) {
    mo->n_mlp = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[32];
        if (mo->n_mlp == SF_MLP_MAX_LAYERS + 1)
            return sf_cli_usage_error(cmd, "--mlp-sizes takes at most %d sizes",
                                      SF_MLP_MAX_LAYERS + 1);
        if (len >= sizeof tok) len = sizeof tok - 1;
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (sf_cli_parse_int(tok, 1, MAX_SIZE, &mo->mlp_sizes[mo->n_mlp]) != 0)
            return sf_cli_usage_error(
                cmd, "--mlp-sizes wants positive integers A,B,..., got '%.64s'", text);
        mo->n_mlp++;
        if (!comma) break;
        p = comma + 1;
    }
    if (mo->n_mlp < 2)
        return sf_cli_usage_error(cmd, "--mlp-sizes needs at least an input and an output size");
    return SF_EXIT_OK;
}

/* A model option the zoo model named by o does not read is a usage error
 * rather than silently ignored (lenet5 --seq-len 5). Unknown names pass: the
 * build says which models exist. */
static int options_apply(const char *cmd, const sf_cli_model_opts *o) {
    int known = 0;
    for (int i = 0; i < sf_model_count() && !known; i++)
        known = strcmp(sf_model_name(i), o->model) == 0;
    if (!known) return SF_EXIT_OK;
    static const struct {
        const char *flag;
        unsigned bit;
    } opts[] = {{"--seq-len", SF_MODEL_OPT_SEQ_LEN},     {"--chunk", SF_MODEL_OPT_CHUNK},
                {"--hidden", SF_MODEL_OPT_HIDDEN},       {"--vocab", SF_MODEL_OPT_VOCAB},
                {"--mlp-sizes", SF_MODEL_OPT_MLP_SIZES}, {"--layers", SF_MODEL_OPT_LAYERS},
                {"--heads", SF_MODEL_OPT_HEADS}};
    int given[] = {o->seq_len != 0,      o->chunk != 0,  o->hidden != 0, o->vocab != 0,
                   o->mlp_sizes != NULL, o->layers != 0, o->heads != 0};
    unsigned taken = sf_model_options_taken(o->model);
    char list[96] = "--batch";
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (taken & opts[k].bit)
            snprintf(list + strlen(list), sizeof list - strlen(list), ", %s", opts[k].flag);
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (given[k] && !(taken & opts[k].bit))
            return sf_cli_usage_error(cmd, "%s does not apply to %s, which takes %s", opts[k].flag,
                                      o->model, list);
    return SF_EXIT_OK;
}

/* The zoo options of o in *mo, or the usage error: --model missing, model options
 * given with a model file (which keeps its own) or to a zoo model that does not
 * read them, a malformed --mlp-sizes. */
static int model_options(const char *cmd, const sf_cli_model_opts *o, int n_devices,
                         sf_model_options *mo) {
    if (!o->model) return sf_cli_usage_error(cmd, "--model is required");
    if (o->onnx_buffers && !sf_onnx_is_path(o->model))
        return sf_cli_usage_error(cmd, "--onnx-buffers applies to ONNX files (.onnx), not to '%.200s'",
                                  o->model);
    if (sf_onnx_is_path(o->model)) { /* takes --batch for a dynamic batch dimension */
        if (o->seq_len || o->chunk || o->hidden || o->vocab || o->mlp_sizes || o->layers ||
            o->heads)
            return sf_cli_usage_error(cmd,
                                      "the model options other than --batch apply to zoo "
                                      "models; the ONNX file '%.200s' keeps its own",
                                      o->model);
        mo->batch = o->batch ? o->batch
                             : (int64_t)SF_CLI_SAMPLES_PER_DEVICE * (n_devices > 0 ? n_devices : 1);
        return SF_EXIT_OK;
    }
    if (sf_cli_is_path(o->model)) {
        if (o->batch || o->seq_len || o->chunk || o->hidden || o->vocab || o->mlp_sizes ||
            o->layers || o->heads)
            return sf_cli_usage_error(cmd,
                                      "--batch and the model options apply to zoo models; "
                                      "the file '%.200s' keeps its own",
                                      o->model);
        return SF_EXIT_OK;
    }
    sf_model_options_default(mo);
    int rc;
    if ((rc = options_apply(cmd, o)) != SF_EXIT_OK) return rc;
    if (o->mlp_sizes && (rc = parse_mlp_sizes(cmd, o->mlp_sizes, mo)) != SF_EXIT_OK) return rc;
    mo->batch =
        o->batch ? o->batch : (int64_t)SF_CLI_SAMPLES_PER_DEVICE * (n_devices > 0 ? n_devices : 1);
    mo->seq_len = o->seq_len;
    mo->chunk = o->chunk;
    mo->hidden = o->hidden;
    mo->vocab = o->vocab;
    mo->layers = o->layers;
    mo->heads = o->heads;
    return SF_EXIT_OK;
}

int sf_cli_model_check(const char *cmd, const sf_cli_model_opts *o) {
    sf_model_options mo;
    return model_options(cmd, o, 1, &mo);
}

int sf_cli_model_open_weights(const char *cmd, const sf_cli_model_opts *o, int n_devices,
                              sf_graph **out, float ***weights) {
    *out = NULL;
    if (weights) *weights = NULL;
    sf_model_options mo;
    int rc = model_options(cmd, o, n_devices, &mo);
    if (rc != SF_EXIT_OK) return rc;
    sf_error err = {0};
    if (sf_onnx_is_path(o->model)) {
        sf_onnx_options oo = {.buffers_file = o->onnx_buffers};
        if (sf_onnx_load_opts(o->model, mo.batch, &oo, out, weights, &err) != SF_OK)
            return sf_cli_fail_err(&err);
        sf_graph_stats st;
        sf_graph_stats_compute(*out, &st);
        if (o->batch && st.batch != o->batch) {
            sf_onnx_weights_free(*out, weights ? *weights : NULL);
            if (weights) *weights = NULL;
            sf_graph_free(*out);
            *out = NULL;
            return sf_cli_usage_error(cmd,
                                      "--batch %lld: the ONNX file '%.200s' fixes the batch at "
                                      "%lld (export it with a dynamic batch dimension)",
                                      (long long)o->batch, o->model, (long long)st.batch);
        }
        return SF_EXIT_OK;
    }
    *out = sf_cli_is_path(o->model) ? sf_model_load_json(o->model, &err)
                                    : sf_model_build(o->model, &mo, &err);
    return *out ? SF_EXIT_OK : sf_cli_fail_err(&err);
}

int sf_cli_model_open(const char *cmd, const sf_cli_model_opts *o, int n_devices, sf_graph **out) {
    return sf_cli_model_open_weights(cmd, o, n_devices, out, NULL);
}

static int is_baseline(const char *name) { return sf_strategy_is_baseline_name(name); }

static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

int sf_cli_strategy_open(const char *name_or_path, const sf_graph *g, const sf_machine *m,
                         sf_strategy **out) {
    *out = NULL;
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    if (!s) return sf_cli_fail("out of memory");
    sf_status st;
    if (!is_baseline(name_or_path) && (sf_cli_is_path(name_or_path) || file_exists(name_or_path)))
        st = sf_strategy_load_json(s, name_or_path, g, m, &err);
    else if (is_baseline(name_or_path))
        st = sf_strategy_baseline(s, name_or_path, g, m, &err);
    else
        st = sf_error_set(&err, SF_ERR_NOTFOUND,
                          "unknown strategy '%.200s': not a baseline (data, model, owt, expert, "
                          "single, megatron[:T], megatron-sp[:T], megatron:tp=T,pp=P,..., fsdp, "
                          "zero1-3) nor a strategy file",
                          name_or_path);
    if (st != SF_OK) {
        sf_strategy_free(s);
        return sf_cli_fail_err(&err);
    }
    *out = s;
    return SF_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------- */

static int usage(FILE *out) {
    fprintf(out,
            "usage: soapflow simulate --model NAME|FILE [options]\n"
            "\n"
            "Simulate one synchronous training iteration of a model on a machine under a\n"
            "parallelization strategy, with FlexFlow's execution simulator and the analytic\n"
            "cost model, and report its time, its traffic and the memory of every device.\n"
            "\n"
            "options:\n"
            "%s"
            "  --machine NAME|FILE    machine preset or machine JSON file (default: %s)\n"
            "                         NAME[N]: its first N devices, N at most one node's\n"
            "                         devices or whole nodes (p100-4x4[8]: two nodes)\n"
            "  -s, --strategy S       a baseline: data, model, owt, expert, single,\n"
            "                         megatron[:T] (Megatron-LM's tensor parallelism, T ways\n"
            "                         inside a node, default a node's devices, data parallel\n"
            "                         across), megatron-sp[:T] (with sequence parallelism),\n"
            "                         fsdp, zero1, zero2, zero3 (data parallel, every weight\n"
            "                         group at that ZeRO stage; fsdp = zero3); each may add\n"
            "                         :zero=0-3 and :recompute=none|selective|full, megatron\n"
            "                         also tp=T and sp (megatron:tp=8,zero=1,recompute=full)\n"
            "                         and 3D parallelism: pp=P pipeline stages, dp=D data\n"
            "                         parallel (default devices / (T P)), mb=B samples a\n"
            "                         micro-batch a data-parallel rank (default 1; batch /\n"
            "                         (D B) micro-batches), schedule=gpipe|1f1b|interleaved:V\n"
            "                         (default 1f1b): megatron:tp=8,pp=16,mb=1,recompute=full;\n"
            "                         or a strategy JSON file (default: %s)\n"
            "  --json                 print one JSON object: iter_ms, makespan_ms, host_ms,\n"
            "                         input_ms (iter_ms = max(makespan + host, input)),\n"
            "                         compute_ms, transfer_ms,\n"
            "                         sync_ms, transfer_bytes, sync_bytes, intra_bytes,\n"
            "                         inter_bytes, peak_live_bytes (the timeline's peak),\n"
            "                         peak_mem_bytes (all alive at once), memory_headroom,\n"
            "                         mem_capacity_bytes, fits,\n"
            "                         tasks, fast_copies (0, or the micro-batches a\n"
            "                         --pipeline-fast run carried to m), replicas (0, or\n"
            "                         the identical data-parallel replicas simulated as\n"
            "                         one; tasks are then one replica's), model, machine,\n"
            "                         strategy, pipeline (null, or\n"
            "                         stages, chunks_per_stage, micro_batches, schedule,\n"
            "                         boundaries), sync, sync_scheme,\n"
            "                         segments, dtype, optimizer, batch, devices,\n"
            "                         idle_devices (no part runs there; a warning names\n"
            "                         them) and a \"per_device\"\n"
            "                         array (device, node, busy_ms, utilization, mem_bytes,\n"
            "                         live_peak_bytes, live_peak_ms, live_peak_kinds (what\n"
            "                         the peak holds: weights, activations, received,\n"
            "                         activation gradients),\n"
            "                         weight_elems: weight elements it holds)\n"
            "  --trace FILE           write the schedule as a Chrome trace (JSON) for\n"
            "                         Perfetto (ui.perfetto.dev) or chrome://tracing, with\n"
            "                         a memory counter per device\n"
            "  --svg FILE             write the schedule as an SVG Gantt chart, memory over\n"
            "                         the iteration under it\n"
            "  --dot FILE             write the graph as Graphviz DOT, each operator labelled\n"
            "                         with its config and coloured by it\n"
            "  --save-strategy FILE   write the strategy as a strategy JSON file\n"
            "  --costs FILE           measured task times ('soapflow profile'): the profiled\n"
            "                         cost model, analytic where the file has no entry\n"
            "%s"
            "%s"
            "%s"
            "%s"
            "  -h, --help             show this help\n"
            "\n"
            "compute is the sum of forward, backward and update task times over all devices;\n"
            "transfer and sync are sums over link tasks (activations and their gradients;\n"
            "gradient all-reduces), so they can exceed the iteration time. Intra- and\n"
            "inter-node bytes count each link a message crosses. See docs/simulator.md.\n"
            "\n"
            "example:\n"
            "  soapflow simulate --model inception_v3 --machine p100-4x4 --strategy data\n"
            "  soapflow simulate --model nmt --strategy expert --json --svg nmt.svg\n"
            "  soapflow simulate --model resnet50 --strategy best.json --trace r50.trace.json\n",
            sf_cli_model_help, DEFAULT_MACHINE, DEFAULT_STRATEGY, sf_cli_memory_help,
            sf_cli_sim_help, sf_cli_dtype_help, sf_cli_optimizer_help);
    return SF_EXIT_OK;
}

typedef struct sim_opts {
    sf_cli_model_opts model;
    const char *machine, *strategy, *trace, *svg, *dot, *save, *costs;
    int json;
    sf_sim_options sim;
    sf_dtype dtype;
    sf_optimizer_kind optimizer;
} sim_opts;

static int parse(int argc, char **argv, sim_opts *o, const char **cmd) {
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    *cmd = a.cmd;
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return -1;
        if (sf_cli_model_option(&a, &o->model)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &o->machine)) continue;
        if (sf_cli_str(&a, "--strategy", "-s", &o->strategy)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &o->json)) continue;
        if (sf_cli_str(&a, "--trace", NULL, &o->trace)) continue;
        if (sf_cli_str(&a, "--svg", NULL, &o->svg)) continue;
        if (sf_cli_str(&a, "--dot", NULL, &o->dot)) continue;
        if (sf_cli_str(&a, "--save-strategy", NULL, &o->save)) continue;
        if (sf_cli_str(&a, "--costs", NULL, &o->costs)) continue;
        if (sf_cli_sim_option(&a, &o->sim)) continue;
        if (sf_cli_memory_option(&a, &o->sim)) continue;
        if (sf_cli_dtype_option(&a, &o->dtype)) continue;
        if (sf_cli_optimizer_option(&a, &o->optimizer)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!o->model.model) return sf_cli_usage_error(a.cmd, "--model is required");
    return SF_EXIT_OK;
}

/* A colour for the i-th distinct config: a hand-picked pastel palette, then
 * hues spaced by the golden angle so that any number stay apart. */
static void config_colour(int i, char *buf, size_t n) {
    static const char *const palette[] = {"#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
                                          "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d",
                                          "#9edae5", "#d9d9d9", "#fdd0a2", "#bcbddc"};
    int np = (int)(sizeof palette / sizeof palette[0]);
    if (i < np) {
        snprintf(buf, n, "%s", palette[i]);
        return;
    }
    /* HSL to RGB (the CSS Color 4 formula) at a light, soft saturation */
    double h = fmod((double)i * 137.508, 360.0), sat = 0.45, l = 0.78;
    double a = sat * (l < 1 - l ? l : 1 - l);
    int rgb[3];
    for (int ch = 0; ch < 3; ch++) {
        static const double offset[3] = {0, 8, 4};
        double k = fmod(offset[ch] + h / 30.0, 12.0);
        double t = fmin(fmin(k - 3, 9 - k), 1.0);
        rgb[ch] = (int)lround((l - a * fmax(-1.0, t)) * 255);
    }
    snprintf(buf, n, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

/* Same degrees and the same devices: the same colour. */
static int same_layout(const sf_config *a, const sf_config *b) {
    if (a->ndim != b->ndim || a->n_parts != b->n_parts) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->degree[i] != b->degree[i]) return 0;
    for (int p = 0; p < a->n_parts; p++)
        if (a->device[p] != b->device[p]) return 0;
    return 1;
}

/* The graph in DOT, each operator labelled with its config and coloured by
 * its layout (malloc'd text; NULL and err when out of memory). */
static char *dot_text(const sf_graph *g, const sf_strategy *s, sf_error *err) {
    int n = sf_graph_num_ops(g);
    size_t cnt = (size_t)(n > 0 ? n : 1);
    char *text = malloc(cnt * 160); /* labels, 128 bytes each */
    char **labels = malloc(cnt * sizeof *labels), **colours = malloc(cnt * sizeof *colours);
    int *cls = malloc(cnt * sizeof *cls), *rep = malloc(cnt * sizeof *rep);
    char *dot = NULL;
    if (!text || !labels || !colours || !cls || !rep) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    int n_cls = 0;
    for (int i = 0; i < n; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        labels[i] = text + (size_t)i * 160;
        colours[i] = labels[i] + 128;
        sf_config_str(sf_graph_op(g, i), c, labels[i], 128);
        cls[i] = -1;
        for (int k = 0; k < n_cls && cls[i] < 0; k++)
            if (same_layout(c, sf_strategy_get(s, rep[k]))) cls[i] = k;
        if (cls[i] < 0) {
            rep[n_cls] = i;
            cls[i] = n_cls++;
        }
        config_colour(cls[i], colours[i], 32);
    }
    dot = sf_graph_to_dot(g, (const char *const *)labels, (const char *const *)colours, err);
done:
    free(text);
    free(labels);
    free(colours);
    free(cls);
    free(rep);
    return dot;
}

typedef struct report {
    const sf_graph *g;
    const sf_machine *m;
    const sf_sim_result *r;
    const char *strategy;
    sf_sim_options sim;
    sf_dtype dtype;
    sf_optimizer_kind optimizer;
    int64_t batch;
    double capacity; /* smallest device memory, bytes */
    int peak_dev;
    int idle;               /* devices no part runs on (sf_strategy_idle_devices) */
    const int64_t *weights; /* [devices] weight elements held (sf_taskgraph_device_weights) */
    const sf_pipeline *pipe; /* the strategy's pipeline, NULL when none */
} report;

/* The weight elements each device holds under s, malloc'd ([n_dev]); NULL with err. */
static int64_t *device_weights(const sf_graph *g, const sf_strategy *s, int n_dev, sf_error *err) {
    sf_taskgraph *tg = sf_taskgraph_new(g, n_dev, err);
    int64_t *w = tg ? calloc((size_t)(n_dev > 0 ? n_dev : 1), sizeof *w) : NULL;
    sf_status st = w ? SF_OK : SF_ERR_NOMEM;
    if (tg) sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < sf_graph_num_ops(g) && st == SF_OK; i++) st = sf_taskgraph_set_tiles(tg, i);
    if (st == SF_OK) st = sf_taskgraph_device_weights(tg, w);
    sf_taskgraph_free(tg);
    if (st != SF_OK) {
        free(w);
        if (tg) sf_error_set(err, st, "out of memory counting weights");
        return NULL;
    }
    return w;
}

static int print_json(const report *rp) {
    const sf_sim_result *r = rp->r;
    json_t *j = json_object(), *per = json_array();
    if (!j || !per) {
        json_decref(j);
        json_decref(per);
        return sf_cli_print_json(NULL);
    }
    int bad = 0;
    bad |= json_object_set_new(j, "model", json_string(sf_graph_name(rp->g)));
    bad |= json_object_set_new(j, "machine", json_string(sf_machine_name(rp->m)));
    bad |= json_object_set_new(j, "strategy", json_string(rp->strategy));
    if (rp->pipe) {
        char sch[32];
        json_t *pj = json_pack("{s:i, s:i, s:i, s:s, s:[]}", "stages", rp->pipe->stages,
                               "chunks_per_stage", rp->pipe->chunks, "micro_batches",
                               rp->pipe->micro_batches, "schedule",
                               sf_pipe_schedule_str(rp->pipe, sch, sizeof sch), "boundaries");
        json_t *bj = pj ? json_object_get(pj, "boundaries") : NULL;
        for (int c = 1; bj && c < rp->pipe->stages * rp->pipe->chunks; c++)
            bad |= json_array_append_new(bj, json_string(sf_graph_op(rp->g, rp->pipe->first[c])->name));
        bad |= pj ? json_object_set_new(j, "pipeline", pj) : -1;
    } else {
        bad |= json_object_set_new(j, "pipeline", json_null());
    }
    bad |= json_object_set_new(j, "sync", json_string(sf_sync_mode_name(rp->sim.sync)));
    bad |= json_object_set_new(j, "sync_scheme", json_string(sf_sync_scheme_name(rp->sim.scheme)));
    bad |= json_object_set_new(j, "segments", json_integer(rp->sim.segments));
    bad |= json_object_set_new(j, "dtype", json_string(sf_dtype_name(rp->dtype)));
    bad |= json_object_set_new(j, "optimizer", json_string(sf_optimizer_name(rp->optimizer)));
    bad |= json_object_set_new(j, "batch", json_integer(rp->batch));
    bad |= json_object_set_new(j, "devices", json_integer(r->n_devices));
    bad |= json_object_set_new(j, "idle_devices", json_integer(rp->idle));
    bad |= sf_cli_json_set_real(j, "iter_ms", r->iter_s * 1e3);
    bad |= sf_cli_json_set_real(j, "makespan_ms", r->makespan_s * 1e3);
    bad |= sf_cli_json_set_real(j, "host_ms", r->host_s * 1e3);
    bad |= sf_cli_json_set_real(j, "input_ms", r->input_s * 1e3);
    bad |= sf_cli_json_set_real(j, "compute_ms", r->compute_s * 1e3);
    bad |= sf_cli_json_set_real(j, "transfer_ms", r->transfer_s * 1e3);
    bad |= sf_cli_json_set_real(j, "sync_ms", r->sync_s * 1e3);
    bad |= json_object_set_new(j, "transfer_bytes", json_integer((json_int_t)r->transfer_bytes));
    bad |= json_object_set_new(j, "sync_bytes", json_integer((json_int_t)r->sync_bytes));
    bad |= json_object_set_new(j, "intra_bytes", json_integer((json_int_t)r->intra_bytes));
    bad |= json_object_set_new(j, "inter_bytes", json_integer((json_int_t)r->inter_bytes));
    bad |= sf_cli_json_set_number(j, "peak_mem_bytes", r->peak_mem_bytes);
    bad |= sf_cli_json_set_number(j, "peak_live_bytes", r->live_peak_bytes);
    bad |= sf_cli_json_set_real(j, "memory_headroom", rp->sim.memory_headroom);
    bad |= sf_cli_json_set_number(j, "mem_capacity_bytes", rp->capacity);
    bad |= json_object_set_new(j, "fits", json_boolean(r->fits));
    bad |= json_object_set_new(j, "tasks", json_integer((json_int_t)r->tasks));
    bad |= json_object_set_new(j, "fast_copies", json_integer(r->fast_copies));
    bad |= json_object_set_new(j, "replicas", json_integer(r->replicas));
    for (int d = 0; d < r->n_devices && !bad; d++) {
        const sf_device *dev = sf_machine_device(rp->m, d);
        double busy = r->device_busy_s[d];
        json_t *kinds = json_object();
        for (int k = 0; k < SF_SIM_MEM_KIND_COUNT && kinds; k++)
            bad |= sf_cli_json_set_number(kinds, sf_sim_mem_kind_name(k),
                                          r->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k]);
        bad |= json_array_append_new(
            per, json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o*, s:I}", "device", d, "node",
                           dev->node, "busy_ms", sf_cli_json_real(busy * 1e3), "utilization",
                           sf_cli_json_real(r->iter_s > 0 ? busy / r->iter_s : 0.0), "mem_bytes",
                           sf_cli_json_number(r->device_mem_bytes[d]), "live_peak_bytes",
                           sf_cli_json_number(r->device_live_bytes[d]), "live_peak_ms",
                           sf_cli_json_real(r->device_live_peak_s[d] * 1e3), "live_peak_kinds",
                           kinds, "weight_elems", (json_int_t)rp->weights[d]));
    }
    bad |= json_object_set_new(j, "per_device", per);
    return sf_cli_print_json_built(j, bad);
}

static int print_text(const report *rp) {
    const sf_sim_result *r = rp->r;
    char b1[48], b2[48], b3[48];
    sf_cli_table *t = sf_cli_table_new(2, NULL, "ll");
    sf_cli_table_cell(t, "model");
    sf_cli_table_cell(t, "%s, batch %s", sf_graph_name(rp->g),
                      sf_cli_fmt_count(rp->batch, b1, sizeof b1));
    sf_cli_table_cell(t, "machine");
    int nodes = sf_machine_num_nodes(rp->m);
    sf_cli_table_cell(t, "%s, %d device%s in %d node%s", sf_machine_name(rp->m), r->n_devices,
                      r->n_devices == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s");
    sf_cli_table_cell(t, "strategy");
    sf_cli_table_cell(t, "%s", rp->strategy);
    if (rp->pipe) {
        char line[512];
        sf_cli_table_cell(t, "pipeline");
        sf_cli_table_cell(t, "%s", sf_pipeline_describe(rp->pipe, rp->g, line, sizeof line));
    }
    sf_cli_table_cell(t, "gradients");
    sf_cli_table_cell(t, "%s, %s",
                      rp->sim.scheme == SF_SCHEME_PS             ? "parameter server"
                      : rp->sim.scheme == SF_SCHEME_HIERARCHICAL ? "hierarchical all-reduce"
                                                                 : "ring all-reduce",
                      rp->sim.sync == SF_SYNC_BULK ? "after each device's backward pass (bulk)"
                                                   : "as soon as each gradient is ready (overlap)");
    sf_cli_table_cell(t, "precision");
    if (!sf_dtype_mixed(rp->dtype))
        sf_cli_table_cell(t, "%s", sf_dtype_name(rp->dtype));
    else
        sf_cli_table_cell(t, "%s, fp32 master weights (mixed precision)", sf_dtype_name(rp->dtype));
    sf_cli_table_cell(t, "optimizer");
    sf_cli_table_cell(t, "%s (%d bytes of state a weight)", sf_optimizer_name(rp->optimizer),
                      4 * sf_optimizer_state_slots(rp->optimizer));
    if (rp->sim.segments > 1) {
        sf_cli_table_cell(t, "segments");
        sf_cli_table_cell(t, "%d per transfer over several links", rp->sim.segments);
    }
    sf_cli_table_cell(t, "iteration");
    if (r->host_s > 0 || r->input_s > 0)
        sf_cli_table_cell(t, "%.3f ms: tasks %.3f ms + host %.3f ms, input pipeline %.3f ms%s",
                          r->iter_s * 1e3, r->makespan_s * 1e3, r->host_s * 1e3,
                          r->input_s * 1e3,
                          r->input_s > r->makespan_s + r->host_s ? " (input-bound)" : "");
    else
        sf_cli_table_cell(t, "%.3f ms", r->iter_s * 1e3);
    sf_cli_table_cell(t, "compute");
    sf_cli_table_cell(t, "%.3f ms (sum over devices)", r->compute_s * 1e3);
    sf_cli_table_cell(t, "transfer");
    sf_cli_table_cell(t, "%.3f ms, %s (activations and their gradients)", r->transfer_s * 1e3,
                      sf_fmt_bytes((double)r->transfer_bytes, b1, sizeof b1));
    sf_cli_table_cell(t, "sync");
    sf_cli_table_cell(t, "%.3f ms, %s (gradient all-reduce)", r->sync_s * 1e3,
                      sf_fmt_bytes((double)r->sync_bytes, b1, sizeof b1));
    sf_cli_table_cell(t, "link traffic");
    sf_cli_table_cell(t, "%s intra-node, %s inter-node",
                      sf_fmt_bytes((double)r->intra_bytes, b1, sizeof b1),
                      sf_fmt_bytes((double)r->inter_bytes, b2, sizeof b2));
    sf_cli_table_cell(t, "peak memory");
    sf_cli_table_cell(t, "%s on device %d at %.3f ms, of %s less %g%% headroom: %s",
                      sf_fmt_bytes(r->live_peak_bytes, b1, sizeof b1), rp->peak_dev,
                      r->device_live_peak_s[rp->peak_dev] * 1e3,
                      sf_fmt_bytes(rp->capacity, b2, sizeof b2), 100.0 * rp->sim.memory_headroom,
                      r->fits ? "fits" : "DOES NOT FIT");
    sf_cli_table_cell(t, "at the peak");
    {
        sf_strbuf s = {0};
        const double *k = &r->device_live_kinds[rp->peak_dev * SF_SIM_MEM_KIND_COUNT];
        for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++)
            sf_strbuf_printf(&s, "%s%s %s", i ? ", " : "", sf_sim_mem_kind_name(i),
                             sf_fmt_bytes(k[i], b3, sizeof b3));
        char *text = sf_strbuf_take(&s);
        sf_cli_table_cell(t, "%s", text ? text : "?");
        free(text);
    }
    sf_cli_table_cell(t, "all alive at once");
    sf_cli_table_cell(t, "%s (every activation kept as if alive at the same time)",
                      sf_fmt_bytes(r->peak_mem_bytes, b1, sizeof b1));
    sf_cli_table_cell(t, "tasks");
    sf_cli_table_cell(t, "%s", sf_cli_fmt_count(r->tasks, b1, sizeof b1));
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;

    static const char *const headers[] = {"device", "node",    "busy ms", "util %",
                                          "peak",   "at once", "capacity"};
    t = sf_cli_table_new(7, headers, "rrrrrrl");
    for (int d = 0; d < r->n_devices; d++) {
        double busy = r->device_busy_s[d];
        double cap = sf_machine_device_kind(rp->m, d)->mem_bytes;
        sf_cli_table_cell(t, "%d", d);
        sf_cli_table_cell(t, "%d", sf_machine_device(rp->m, d)->node);
        sf_cli_table_cell(t, "%.3f", busy * 1e3);
        sf_cli_table_cell(t, "%.1f", r->iter_s > 0 ? 100.0 * busy / r->iter_s : 0.0);
        sf_cli_table_cell(t, "%s", sf_fmt_bytes(r->device_live_bytes[d], b1, sizeof b1));
        sf_cli_table_cell(t, "%s", sf_fmt_bytes(r->device_mem_bytes[d], b2, sizeof b2));
        sf_cli_table_cell(
            t, "%s%s", sf_fmt_bytes(cap, b3, sizeof b3),
            r->device_live_bytes[d] > cap * (1.0 - rp->sim.memory_headroom) ? " (over)" : "");
    }
    fputc('\n', stdout);
    rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    return rc;
}

int sf_cmd_simulate(int argc, char **argv) {
    sim_opts o;
    memset(&o, 0, sizeof o);
    sf_sim_options_default(&o.sim);
    sf_cli_memory_default(&o.sim);
    const char *cmd;
    int rc = parse(argc, argv, &o, &cmd);
    if (rc < 0) return usage(stdout);
    if (rc != SF_EXIT_OK) return rc;
    if (!o.machine) o.machine = DEFAULT_MACHINE;
    if (!o.strategy) o.strategy = DEFAULT_STRATEGY;
    if (o.sim.pipeline_fast && !o.trace && !o.svg) o.sim.keep_schedule = 0; /* no pictures */
    if (o.trace || o.svg) o.sim.every_replica = 1; /* pictures of every device */

    /* every output is checked before any work, and all are written together
     * once the work is done: a failure replaces none of the files there */
    const char *outs[] = {o.save, o.dot, o.trace, o.svg};
    if ((rc = sf_cli_model_check(cmd, &o.model)) != SF_EXIT_OK ||
        (rc = sf_cli_outputs_check(outs, 4)) != SF_EXIT_OK)
        return rc;

    sf_error err = {0};
    sf_machine *m = NULL;
    sf_graph *g = NULL;
    sf_strategy *s = NULL;
    sf_cost_model *cm = NULL;
    sf_sim *sim = NULL;
    sf_cli_outputs files = {0};
    int64_t *weights = NULL;

    m = sf_machine_open(o.machine, &err);
    if (!m) return sf_cli_fail_err(&err);
    rc = sf_cli_model_open(cmd, &o.model, sf_machine_num_devices(m), &g);
    if (rc != SF_EXIT_OK) goto done;
    rc = sf_cli_strategy_open(o.strategy, g, m, &s);
    if (rc != SF_EXIT_OK) goto done;

    rc = sf_cli_cost_model_open(m, o.costs, o.dtype, o.optimizer, &cm);
    if (rc != SF_EXIT_OK) goto done;
    sim = sf_sim_new(g, m, cm, &o.sim, &err);
    sf_sim_result r;
    if (!sim || sf_sim_run(sim, s, &r, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    sf_cli_cost_model_report(cm);
    int idle = sf_cli_idle_report(s, m, o.strategy);
    SF_LOG_INFO_F("%s on %s under %s: %lld tasks, %.3f ms", sf_graph_name(g), sf_machine_name(m),
                  o.strategy, (long long)r.tasks, r.iter_s * 1e3);

    if (o.save)
        rc = sf_cli_outputs_add(&files, o.save, sf_strategy_to_json_for(s, g, m, &err), &err);
    if (rc == SF_EXIT_OK && o.dot)
        rc = sf_cli_outputs_add(&files, o.dot, dot_text(g, s, &err), &err);
    if (rc == SF_EXIT_OK && o.trace)
        rc = sf_cli_outputs_add(&files, o.trace, sf_sim_trace_to_json(sim, &err), &err);
    if (rc == SF_EXIT_OK && o.svg)
        rc = sf_cli_outputs_add(&files, o.svg, sf_sim_to_svg(sim, &err), &err);
    if (rc == SF_EXIT_OK) rc = sf_cli_outputs_write(&files);
    if (rc != SF_EXIT_OK) goto done;

    weights = device_weights(g, s, r.n_devices, &err);
    if (!weights) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    report rp = {g, m, &r, o.strategy, o.sim, o.dtype, o.optimizer, 0, 0, 0, idle, weights,
                 sf_strategy_pipeline(s)};
    sf_graph_stats gs;
    sf_graph_stats_compute(g, &gs);
    rp.batch = gs.batch;
    rp.capacity = r.n_devices > 0 ? sf_machine_device_kind(m, 0)->mem_bytes : 0;
    for (int d = 0; d < r.n_devices; d++) {
        double cap = sf_machine_device_kind(m, d)->mem_bytes;
        if (cap < rp.capacity) rp.capacity = cap;
        if (r.device_live_bytes[d] > r.device_live_bytes[rp.peak_dev]) rp.peak_dev = d;
    }
    rc = o.json ? print_json(&rp) : print_text(&rp);
done:
    free(weights);
    sf_cli_outputs_free(&files);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
