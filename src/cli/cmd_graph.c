/*
 * cmd_graph.c - `soapflow graph`: build a model and say what it costs.
 *
 * The model is a zoo name, a model JSON file (an argument holding '/' or
 * ending in ".json") or an ONNX file (".onnx"). A zoo model gets the batch the
 * papers used, 64 samples per device of the machine it will be planned for
 * (--machine, default p100-4x4 => 1024), unless --batch says otherwise, and so
 * does the dynamic batch dimension of an ONNX file; a model JSON file keeps the
 * batch written in it, so model options are refused with a file rather than
 * silently ignored. The same numbers come out as a table for people or one
 * JSON object for programs; --dot and --save write the picture and the model
 * file: both paths are checked before any work, and both files are written
 * together before anything is printed, so that a failure shows as one error
 * line and a non-zero status, never after a full report, and replaces neither
 * file.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "soapflow/graph.h"
#include "soapflow/io.h"

#define DEFAULT_MACHINE "p100-4x4"

static int usage(FILE *out) {
    fprintf(out,
            "usage: soapflow graph --model NAME|FILE [options]\n"
            "\n"
            "Build a zoo model (see 'soapflow models') or load a model JSON or ONNX file,\n"
            "and print its operators, trainable parameters, FLOPs and memory at its batch.\n"
            "\n"
            "options:\n"
            "  -m, --model NAME|FILE  a zoo model, a model file (a name holding '/' or ending\n"
            "                         in .json; see docs/formats-model.md) or an ONNX file\n"
            "                         (.onnx; see docs/formats-onnx.md)\n"
            "  -b, --batch N          global batch of a zoo model or of an ONNX file's dynamic\n"
            "                         batch (default: 64 per device of the machine); a model\n"
            "                         JSON file keeps its own batch\n"
            "  --machine NAME|FILE    machine preset or machine JSON file that sets the\n"
            "                         default batch (default: %s, 16 devices => 1024)\n"
            "                         NAME[N]: its first N devices, N at most one node's\n"
            "                         devices or whole nodes (p100-4x4[8]: two nodes)\n"
            "%s"
            "  --ops                  add a table of every operator: type, output shape,\n"
            "                         parameters, forward GFLOP and parallel dimensions\n"
            "                         (N:s C:p H:a W:a - s sample, a attribute, p parameter,\n"
            "                         - not splittable; names by position: N C H W, N T C, N C)\n"
            "  --json                 print one JSON object instead: model, source (zoo or\n"
            "                         file), machine (when it set the batch), ops, params,\n"
            "                         flops_fwd, flops_bwd, dtype, activation_bytes,\n"
            "                         saved_bytes (what the backward keeps, as frameworks\n"
            "                         do: docs/cost-model.md),\n"
            "                         weight_bytes (fp32 masters), weight_copy_bytes (the\n"
            "                         compute copy of mixed precision, 0 in fp32), batch\n"
            "                         (and \"operators\" with --ops)\n"
            "  --dtype fp32|bf16|fp16 count activations in that dtype's bytes, and add a\n"
            "                         compute copy of the fp32 weights in it (mixed\n"
            "                         precision; default fp32)\n"
            "  --dot FILE             write the graph as Graphviz DOT\n"
            "  --save FILE            write the model as a model JSON file\n"
            "  -h, --help             show this help\n"
            "\n"
            "FLOPs are for one pass over the whole batch; activations are all operator\n"
            "outputs at that batch; weights are fp32 trainable parameters (the masters of\n"
            "mixed precision).\n"
            "\n"
            "example:\n"
            "  soapflow graph --model resnet50 --machine dgx-a100 --ops\n"
            "  soapflow graph --model inception_v3 --batch 32 --json --dot inception.dot\n",
            DEFAULT_MACHINE, sf_cli_model_size_help);
    return SF_EXIT_OK;
}

typedef struct graph_opts {
    sf_cli_model_opts model;
    const char *machine, *dot, *save;
    int json, ops;
    sf_dtype dtype;
} graph_opts;

/* What the totals take in the plan's dtype: activations (counted by the graph
 * in fp32 elements) in its bytes; the fp32 master weights stay as counted, and
 * mixed precision adds a compute copy of them in the dtype. */
static double activation_bytes(const sf_graph_stats *st, sf_dtype t) {
    return st->activation_bytes * sf_dtype_bytes(t) / SF_ELEM_BYTES;
}
static double weight_copy_bytes(const sf_graph_stats *st, sf_dtype t) {
    return !sf_dtype_mixed(t) ? 0 : (double)st->params * sf_dtype_bytes(t);
}

/* ---- the parallel dimensions of an operator ---------------------------- */

static const char *dim_label(int ndim, int i) {
    static const char *const r4[] = {"N", "C", "H", "W"};
    static const char *const r3[] = {"N", "T", "C"};
    static const char *const r2[] = {"N", "C"};
    static const char *const rn[] = {"d0", "d1", "d2", "d3", "d4", "d5"};
    if (ndim == 4) return r4[i];
    if (ndim == 3) return r3[i];
    if (ndim == 2) return r2[i];
    if (ndim == 1) return "N";
    return rn[i];
}

static char kind_letter(sf_dim_kind k) {
    switch (k) {
    case SF_DIM_SAMPLE: return 's';
    case SF_DIM_ATTRIBUTE: return 'a';
    case SF_DIM_PARAMETER: return 'p';
    case SF_DIM_REDUCE: return 'r';
    default: return '-';
    }
}

/* "N:s C:p H:a W:a" */
static void dims_str(const sf_op *op, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    int named = 0; /* the output's dimensions; reduction dimensions are K */
    for (int i = 0; i < op->space.ndim && i < SF_MAX_DIMS; i++)
        named += op->kinds[i] != SF_DIM_REDUCE;
    for (int i = 0; i < op->space.ndim && i < SF_MAX_DIMS; i++) {
        const char *label = op->kinds[i] == SF_DIM_REDUCE ? "K" : dim_label(named, i);
        int k =
            snprintf(buf + len, n - len, "%s%s:%c", i ? " " : "", label, kind_letter(op->kinds[i]));
        if (k < 0 || (size_t)k >= n - len) break;
        len += (size_t)k;
    }
}

/* ---- output ------------------------------------------------------------ */

static json_t *op_json(const sf_graph *g, const sf_op *op) {
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    json_t *o = json_object(), *inputs = json_array(), *outputs = json_array(),
           *dims = json_array();
    int bad = !o || !inputs || !outputs || !dims;
    for (int i = 0; !bad && i < op->n_inputs; i++)
        bad |= json_array_append_new(inputs, json_string(sf_graph_op(g, op->inputs[i].op)->name));
    for (int k = 0; !bad && k < op->n_outputs; k++) {
        json_t *shape = json_array();
        for (int i = 0; shape && i < op->out_shapes[k].ndim; i++)
            json_array_append_new(shape, json_integer(op->out_shapes[k].d[i]));
        bad |= json_array_append_new(outputs, shape);
    }
    for (int i = 0; !bad && i < op->space.ndim; i++)
        bad |=
            json_array_append_new(dims, json_pack("{s:I, s:s}", "size", (json_int_t)op->space.d[i],
                                                  "kind", sf_dim_kind_name(op->kinds[i])));
    if (bad) {
        json_decref(o);
        json_decref(inputs);
        json_decref(outputs);
        json_decref(dims);
        return NULL;
    }
    json_object_set_new(o, "id", json_integer(op->id));
    json_object_set_new(o, "name", json_string(op->name));
    json_object_set_new(o, "type", json_string(sf_op_type_name(op->type)));
    json_object_set_new(o, "inputs", inputs);
    json_object_set_new(o, "outputs", outputs);
    json_object_set_new(o, "params", json_integer(op->n_params));
    if (op->weight_owner >= 0)
        json_object_set_new(o, "shares_weights_of",
                            json_string(sf_graph_op(g, op->weight_owner)->name));
    sf_cli_json_set_number(o, "flops_fwd", c.flops_fwd);
    sf_cli_json_set_number(o, "flops_bwd", c.flops_bwd);
    json_object_set_new(o, "parallel_dims", dims);
    return o;
}

static int print_json(const sf_graph *g, const sf_graph_stats *st, const graph_opts *o,
                      const char *machine) {
    json_t *j = json_object();
    if (!j) return sf_cli_print_json(NULL);
    int bad = 0;
    bad |= json_object_set_new(j, "model", json_string(sf_graph_name(g)));
    bad |= json_object_set_new(j, "source",
                               json_string(sf_cli_is_path(o->model.model) ? "file" : "zoo"));
    if (machine) bad |= json_object_set_new(j, "machine", json_string(machine));
    bad |= json_object_set_new(j, "ops", json_integer(st->ops));
    bad |= json_object_set_new(j, "params", json_integer(st->params));
    bad |= sf_cli_json_set_number(j, "flops_fwd", st->flops_fwd);
    bad |= sf_cli_json_set_number(j, "flops_bwd", st->flops_bwd);
    bad |= json_object_set_new(j, "dtype", json_string(sf_dtype_name(o->dtype)));
    bad |= sf_cli_json_set_number(j, "activation_bytes", activation_bytes(st, o->dtype));
    bad |= sf_cli_json_set_number(j, "saved_bytes",
                                  st->saved_bytes * sf_dtype_bytes(o->dtype) / SF_ELEM_BYTES);
    bad |= sf_cli_json_set_number(j, "weight_bytes", st->weight_bytes);
    bad |= sf_cli_json_set_number(j, "weight_copy_bytes", weight_copy_bytes(st, o->dtype));
    bad |= json_object_set_new(j, "batch", json_integer(st->batch));
    if (o->ops) {
        json_t *arr = json_array();
        for (int i = 0; arr && i < sf_graph_num_ops(g); i++) {
            json_t *op = op_json(g, sf_graph_op(g, i));
            if (!op || json_array_append_new(arr, op) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        bad |= json_object_set_new(j, "operators", arr);
    }
    return sf_cli_print_json_built(j, bad);
}

/* GFLOP with thousands separators ("8,483.1"); small figures keep three
 * significant digits ("0.000470") rather than rounding to zero. */
static char *fmt_gflop(double flops, char *buf, size_t n) {
    double g = flops / 1e9;
    if (g == 0.0) {
        snprintf(buf, n, "0");
    } else if (g < 1.0) {
        snprintf(buf, n, "%.3g", g);
    } else if (g < 100.0) {
        snprintf(buf, n, "%.3f", g);
    } else if (g < 9e15) {
        char whole[40];
        int64_t tenths = (int64_t)(g * 10.0 + 0.5);
        snprintf(buf, n, "%s.%d", sf_cli_fmt_count(tenths / 10, whole, sizeof whole),
                 (int)(tenths % 10));
    } else {
        snprintf(buf, n, "%.4g", g);
    }
    return buf;
}

/* A total in the unit that suits it: "8,483.1 GFLOP", "470.4 MFLOP", "2,010 FLOP". */
static char *fmt_flops(double flops, char *buf, size_t n) {
    char num[48];
    if (flops >= 1e9) {
        snprintf(buf, n, "%s GFLOP", fmt_gflop(flops, num, sizeof num));
    } else if (flops >= 1e6) {
        snprintf(buf, n, "%.1f MFLOP", flops / 1e6);
    } else {
        snprintf(buf, n, "%s FLOP", sf_cli_fmt_count((int64_t)flops, num, sizeof num));
    }
    return buf;
}

static int print_ops(const sf_graph *g) {
    static const char *const headers[] = {"id",     "name",      "type",         "output",
                                          "params", "fwd GFLOP", "parallel dims"};
    sf_cli_table *t = sf_cli_table_new(7, headers, "rllrrrl");
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        char shape[96], count[32], gf[32], dims[96];
        sf_tile full = sf_tile_full(&op->space);
        sf_op_cost c;
        sf_op_tile_cost(op, &full, &c);
        sf_shape_str(&op->out_shapes[0], shape, sizeof shape);
        dims_str(op, dims, sizeof dims);
        sf_cli_table_cell(t, "%d", op->id);
        sf_cli_table_cell(t, "%s", op->name);
        sf_cli_table_cell(t, "%s", sf_op_type_name(op->type));
        if (op->n_outputs > 1)
            sf_cli_table_cell(t, "%s (+%d)", shape, op->n_outputs - 1);
        else
            sf_cli_table_cell(t, "%s", shape);
        if (op->weight_owner >= 0)
            sf_cli_table_cell(t, "shared");
        else
            sf_cli_table_cell(t, "%s", sf_cli_fmt_count(op->n_params, count, sizeof count));
        sf_cli_table_cell(t, "%s", fmt_gflop(c.flops_fwd, gf, sizeof gf));
        sf_cli_table_cell(t, "%s", dims);
    }
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    return rc;
}

static int print_text(const sf_graph *g, const sf_graph_stats *st, const graph_opts *o,
                      const char *batch_note) {
    char count[32], buf[64];
    sf_cli_table *t = sf_cli_table_new(2, NULL, "ll");
    sf_cli_table_cell(t, "model");
    if (sf_cli_is_path(o->model.model))
        sf_cli_table_cell(t, "%s (file %s)", sf_graph_name(g), o->model.model);
    else
        sf_cli_table_cell(t, "%s", sf_graph_name(g));
    sf_cli_table_cell(t, "batch");
    sf_cli_table_cell(t, "%s%s", sf_cli_fmt_count(st->batch, count, sizeof count), batch_note);
    sf_cli_table_cell(t, "operators");
    sf_cli_table_cell(t, "%s", sf_cli_fmt_count(st->ops, count, sizeof count));
    sf_cli_table_cell(t, "parameters");
    sf_cli_table_cell(t, "%s", sf_cli_fmt_count(st->params, count, sizeof count));
    sf_cli_table_cell(t, "forward");
    sf_cli_table_cell(t, "%s", fmt_flops(st->flops_fwd, buf, sizeof buf));
    sf_cli_table_cell(t, "backward");
    sf_cli_table_cell(t, "%s", fmt_flops(st->flops_bwd, buf, sizeof buf));
    sf_cli_table_cell(t, "activations");
    sf_cli_table_cell(t, "%s (%s)", sf_fmt_bytes(activation_bytes(st, o->dtype), buf, sizeof buf),
                      sf_dtype_name(o->dtype));
    sf_cli_table_cell(t, "saved");
    sf_cli_table_cell(
        t, "%s for the backward pass, as frameworks keep it",
        sf_fmt_bytes(st->saved_bytes * sf_dtype_bytes(o->dtype) / SF_ELEM_BYTES, buf, sizeof buf));
    sf_cli_table_cell(t, "weights");
    if (!sf_dtype_mixed(o->dtype)) {
        sf_cli_table_cell(t, "%s (fp32)", sf_fmt_bytes(st->weight_bytes, buf, sizeof buf));
    } else {
        char copy[64];
        sf_cli_table_cell(t, "%s fp32 masters + %s %s compute copies",
                          sf_fmt_bytes(st->weight_bytes, buf, sizeof buf),
                          sf_fmt_bytes(weight_copy_bytes(st, o->dtype), copy, sizeof copy),
                          sf_dtype_name(o->dtype));
    }
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc == SF_EXIT_OK && o->ops) {
        fputc('\n', stdout);
        rc = print_ops(g);
    }
    return rc;
}

/* ---- the command ------------------------------------------------------- */

static int parse(int argc, char **argv, graph_opts *o, const char **cmd) {
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    *cmd = a.cmd;
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return -1;
        if (sf_cli_model_option(&a, &o->model)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &o->machine)) continue;
        if (sf_cli_flag(&a, "--ops", NULL, &o->ops)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &o->json)) continue;
        if (sf_cli_str(&a, "--dot", NULL, &o->dot)) continue;
        if (sf_cli_str(&a, "--save", NULL, &o->save)) continue;
        if (sf_cli_dtype_option(&a, &o->dtype)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    /* a bad command line is a usage error before any file is read */
    return sf_cli_model_check(a.cmd, &o->model);
}

int sf_cmd_graph(int argc, char **argv) {
    graph_opts o;
    memset(&o, 0, sizeof o);
    const char *cmd;
    int rc = parse(argc, argv, &o, &cmd);
    if (rc < 0) return usage(stdout);
    if (rc != SF_EXIT_OK) return rc;
    const char *outs[] = {o.dot, o.save};
    if ((rc = sf_cli_outputs_check(outs, 2)) != SF_EXIT_OK) return rc;

    /* The machine only sets the default batch here, so its description is
     * enough; it is still read when --machine is given, to catch a typo. */
    /* a model JSON file keeps its batch; an ONNX file's dynamic batch is planned
     * like a zoo model's */
    int is_onnx = sf_onnx_is_path(o.model.model);
    int is_file = sf_cli_is_path(o.model.model) && !is_onnx;
    sf_error err = {0};
    char batch_note[160] = "";
    const char *machine = o.machine;
    int devices = 0;
    if (!is_file && !o.model.batch && !machine) machine = DEFAULT_MACHINE;
    if (machine) {
        sf_machine_desc md;
        if (sf_cli_machine_desc(machine, &md, &err) != SF_OK ||
            sf_machine_desc_validate(&md, &err) != SF_OK)
            return sf_cli_fail_err(&err);
        devices = md.nodes * md.devices_per_node;
        if (!is_file && !o.model.batch)
            snprintf(batch_note, sizeof batch_note, " (%d per device x %d devices of %s)",
                     SF_CLI_SAMPLES_PER_DEVICE, devices, md.name);
    }
    if (is_file) snprintf(batch_note, sizeof batch_note, " (from the file)");

    sf_graph *g;
    if ((rc = sf_cli_model_open(cmd, &o.model, devices, &g)) != SF_EXIT_OK) return rc;
    if (is_onnx) {
        sf_graph_stats bs;
        sf_graph_stats_compute(g, &bs);
        int64_t asked = o.model.batch
                            ? o.model.batch
                            : (int64_t)SF_CLI_SAMPLES_PER_DEVICE * (devices ? devices : 1);
        if (bs.batch != asked) snprintf(batch_note, sizeof batch_note, " (fixed by the file)");
    }
    SF_LOG_INFO_F("%s: %d operators", sf_graph_name(g), sf_graph_num_ops(g));

    sf_cli_outputs files = {0};
    if (o.dot) rc = sf_cli_outputs_add(&files, o.dot, sf_graph_to_dot(g, NULL, NULL, &err), &err);
    if (rc == SF_EXIT_OK && o.save)
        rc = sf_cli_outputs_add(&files, o.save, sf_model_to_json(g, &err), &err);
    if (rc == SF_EXIT_OK) rc = sf_cli_outputs_write(&files);
    if (rc != SF_EXIT_OK) {
        sf_cli_outputs_free(&files);
        sf_graph_free(g);
        return rc;
    }

    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    rc = o.json ? print_json(g, &st, &o, machine) : print_text(g, &st, &o, batch_note);
    sf_graph_free(g);
    return rc;
}
