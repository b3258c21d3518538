/*
 * machine_json.c - machine descriptions in JSON (format: docs/formats-machine.md).
 *
 * The file holds what sf_machine_desc holds, in the units people read on data
 * sheets, with the unit in every key (GBps, TFLOPS, us; GB = 1e9 bytes). The
 * reader is strict: duplicate keys, unknown keys and missing keys are errors,
 * so a typo never silently falls back to a default. Syntax errors name
 * FILE:LINE:COL from jansson; semantic errors name the field path
 * ("m.json: field 'intra.bandwidth_GBps': must be a number from 1e-09 to
 * 1e+21"), since
 * jansson keeps no positions for values.
 *
 * Units are converted by shifting the decimal exponent of the number's
 * shortest round-trip text ("12.5" GB/s -> "12.5e9" B/s), not by multiplying
 * by 1e9: what a user types is then exactly the double the literal would be in
 * C, and a description written and read again comes back bit for bit for every
 * value of up to 15 significant digits (all presets, all data sheet figures).
 * A value that needs 16-17 digits cannot always survive: in some binades the
 * doubles in file units are sparser than those in base units, so no file value
 * maps back to it; the writer then picks the file value that reads back
 * nearest, within one ulp. The writer prints with the fewest digits, at least
 * 15, that read back exactly, so files stay readable ("10.6", not
 * "10.599999999999999").
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "soapflow/io.h"

/* ---- decimal unit shifts ----------------------------------------------- */

/* Fewest significant digits (1..17) whose %e text reads back as v. */
static int shortest_digits(double v, char *buf, size_t cap) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v) return p;
    }
    return 17;
}

/* v * 10^exp10, computed on decimal text. A v that a person could have typed
 * (its shortest text has at most 15 digits, and every decimal of at most 15
 * digits is recovered that way) is scaled as that decimal, so "10.6" TFLOP/s
 * is exactly the double 10.6e12. Any other v is scaled from its (practically
 * exact) 31-digit expansion: the shortest text of such a v is coarser than v
 * and would drift by ulps. */
static double shift_decimal(double v, int exp10) {
    if (v == 0 || !isfinite(v)) return v;
    char buf[64], out[80];
    if (shortest_digits(v, buf, sizeof buf) > 15) snprintf(buf, sizeof buf, "%.30e", v);
    char *e = strchr(buf, 'e');
    if (!e) return v;
    long ex = strtol(e + 1, NULL, 10);
    *e = '\0';
    snprintf(out, sizeof out, "%se%ld", buf, ex + exp10);
    return strtod(out, NULL);
}

/* The value to write for x stored in base units, given that the reader
 * computes shift_decimal(y, exp10): y such that the reader gets x back, or,
 * where no double in file units maps to x (a 16-17 digit x in a binade where
 * file-unit doubles are sparser), the y whose reading is nearest to x. */
static double to_file_units(double x, int exp10) {
    double y = shift_decimal(x, -exp10);
    double best = y, best_gap = fabs(shift_decimal(y, exp10) - x);
    double lo = y, hi = y;
    for (int i = 0; i < 4 && best_gap > 0; i++) {
        lo = nextafter(lo, -INFINITY);
        hi = nextafter(hi, INFINITY);
        double glo = fabs(shift_decimal(lo, exp10) - x), ghi = fabs(shift_decimal(hi, exp10) - x);
        if (glo < best_gap) best = lo, best_gap = glo;
        if (ghi < best_gap) best = hi, best_gap = ghi;
    }
    return best;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct reader {
    const char *origin;
    sf_error *err;
} reader;

/* What a number may be (sf_machine_desc_validate's bounds, in file units). */
typedef enum num_rule {
    NUM_MEM,          /* > 0 and <= SF_MAX_MEM_BYTES: memory sizes */
    NUM_RATE,         /* SF_MIN_RATE to SF_MAX_RATE: peaks and bandwidths */
    NUM_RATE_OR_ZERO, /* 0 (unsupported) or a rate: fp16 and bf16 peaks */
    NUM_LATENCY,      /* 0 to SF_MAX_LATENCY_S */
    NUM_FRACTION      /* 0 (the cost model's default) to 1: device.cost figures */
} num_rule;

static void join_path(char *out, size_t cap, const char *path, const char *key) {
    if (path[0])
        snprintf(out, cap, "%s.%s", path, key);
    else
        snprintf(out, cap, "%s", key);
}

static sf_status field_error(reader *r, sf_status code, const char *path, const char *key,
                             const char *what) {
    char full[128];
    join_path(full, sizeof full, path, key);
    return sf_error_set(r->err, code, "%s: field '%s': %s", r->origin, full, what);
}

/* Every key of obj must be one of `allowed` (NULL-terminated). */
static sf_status check_keys(reader *r, const json_t *obj, const char *path,
                            const char *const *allowed) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        (void)val;
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
        if (ok) continue;
        char list[256];
        size_t used = 0;
        list[0] = '\0';
        for (int i = 0; allowed[i] && used < sizeof list; i++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
            if (w < 0) break;
            used += (size_t)w;
        }
        char what[320];
        snprintf(what, sizeof what, "unknown field (expected one of: %s)", list);
        return field_error(r, SF_ERR_PARSE, path, key, what);
    }
    return SF_OK;
}

static const json_t *get(reader *r, const json_t *obj, const char *path, const char *key,
                         int required, sf_status *st) {
    const json_t *v = json_object_get(obj, key);
    if (!v && required) *st = field_error(r, SF_ERR_PARSE, path, key, "missing (required)");
    return v;
}

static sf_status get_object(reader *r, const json_t *obj, const char *path, const char *key,
                            const json_t **out) {
    sf_status st = SF_OK;
    *out = get(r, obj, path, key, 1, &st);
    if (st != SF_OK) return st;
    if (!json_is_object(*out)) return field_error(r, SF_ERR_PARSE, path, key, "must be an object");
    return SF_OK;
}

static sf_status get_name(reader *r, const json_t *obj, const char *path, const char *key,
                          char *out, size_t cap) {
    sf_status st = SF_OK;
    const json_t *v = get(r, obj, path, key, 1, &st);
    if (st != SF_OK) return st;
    if (!json_is_string(v)) return field_error(r, SF_ERR_PARSE, path, key, "must be a string");
    size_t n = json_string_length(v);
    if (n == 0 || n >= cap || strlen(json_string_value(v)) != n) {
        char what[96];
        snprintf(what, sizeof what, "must be 1 to %zu characters without NUL", cap - 1);
        return field_error(r, SF_ERR_INVALID, path, key, what);
    }
    memcpy(out, json_string_value(v), n + 1);
    return SF_OK;
}

static sf_status get_int(reader *r, const json_t *obj, const char *path, const char *key, int min,
                         int max, int *out) {
    sf_status st = SF_OK;
    const json_t *v = get(r, obj, path, key, 1, &st);
    if (st != SF_OK) return st;
    if (!json_is_integer(v)) return field_error(r, SF_ERR_PARSE, path, key, "must be an integer");
    json_int_t x = json_integer_value(v);
    if (x < min || x > max) {
        char what[96];
        snprintf(what, sizeof what, "must be an integer from %d to %d (got %lld)", min, max,
                 (long long)x);
        return field_error(r, SF_ERR_INVALID, path, key, what);
    }
    *out = (int)x;
    return SF_OK;
}

/* A number in file units, stored as value * 10^exp10. Optional numbers that
 * are absent leave *out untouched. */
static sf_status get_num(reader *r, const json_t *obj, const char *path, const char *key,
                         int required, num_rule rule, int exp10, double *out) {
    sf_status st = SF_OK;
    const json_t *v = get(r, obj, path, key, required, &st);
    if (st != SF_OK || !v) return st;
    char need[96];
    double unit = pow(10, exp10);
    switch (rule) {
    case NUM_MEM:
        snprintf(need, sizeof need, "must be a number above 0 and at most %g",
                 SF_MAX_MEM_BYTES / unit);
        break;
    case NUM_RATE:
        snprintf(need, sizeof need, "must be a number from %g to %g", SF_MIN_RATE / unit,
                 SF_MAX_RATE / unit);
        break;
    case NUM_RATE_OR_ZERO:
        snprintf(need, sizeof need, "must be 0 (unsupported) or a number from %g to %g",
                 SF_MIN_RATE / unit, SF_MAX_RATE / unit);
        break;
    case NUM_LATENCY:
        snprintf(need, sizeof need, "must be a number from 0 to %g", SF_MAX_LATENCY_S / unit);
        break;
    case NUM_FRACTION:
        snprintf(need, sizeof need, "must be a number from 0 (the model's default) to 1");
        break;
    }
    if (!json_is_number(v)) return field_error(r, SF_ERR_PARSE, path, key, need);
    double x = shift_decimal(json_number_value(v), exp10);
    int ok = isfinite(x);
    switch (rule) {
    case NUM_MEM: ok = ok && x > 0 && x <= SF_MAX_MEM_BYTES; break;
    case NUM_RATE: ok = ok && x >= SF_MIN_RATE && x <= SF_MAX_RATE; break;
    case NUM_RATE_OR_ZERO: ok = ok && (x == 0 || (x >= SF_MIN_RATE && x <= SF_MAX_RATE)); break;
    case NUM_LATENCY: ok = ok && x >= 0 && x <= SF_MAX_LATENCY_S; break;
    case NUM_FRACTION: ok = ok && x >= 0 && x <= 1; break;
    }
    if (!ok) return field_error(r, SF_ERR_INVALID, path, key, need);
    *out = x;
    return SF_OK;
}

static const char *const top_keys[] = {"name",  "nodes", "devices_per_node", "device",
                                       "intra", "inter", "runtime",          NULL};
static const char *const runtime_keys[] = {"cores_per_node",      "copy_GBps", "copy_run_ns",
                                           "sync_after_backward", "allreduce", NULL};
static const char *const point_keys[] = {"bytes", "link_GBps", NULL};

/* runtime.allreduce: [{"bytes": B, "link_GBps": X}, ...], sizes increasing. */
static sf_status parse_allreduce(reader *r, const json_t *rtm, sf_machine_desc *d) {
    const json_t *a = json_object_get(rtm, "allreduce");
    if (!a) return SF_OK;
    if (!json_is_array(a) || json_array_size(a) > SF_MAX_SYNC_POINTS) {
        char what[96];
        snprintf(what, sizeof what, "must be an array of at most %d points", SF_MAX_SYNC_POINTS);
        return field_error(r, SF_ERR_PARSE, "runtime", "allreduce", what);
    }
    d->n_sync = (int)json_array_size(a);
    for (int i = 0; i < d->n_sync; i++) {
        char path[48];
        snprintf(path, sizeof path, "runtime.allreduce[%d]", i);
        const json_t *pt = json_array_get(a, (size_t)i);
        if (!json_is_object(pt))
            return field_error(r, SF_ERR_PARSE, "runtime", path + 8, "must be an object");
        sf_status st = check_keys(r, pt, path, point_keys);
        if (st == SF_OK) st = get_num(r, pt, path, "bytes", 1, NUM_MEM, 0, &d->sync_bytes[i]);
        if (st == SF_OK &&
            (d->sync_bytes[i] < 1 || (i > 0 && d->sync_bytes[i] <= d->sync_bytes[i - 1])))
            st = field_error(r, SF_ERR_INVALID, path, "bytes",
                             "must be at least 1 and above the point before");
        if (st == SF_OK) st = get_num(r, pt, path, "link_GBps", 1, NUM_RATE, 9, &d->sync_bw_Bps[i]);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}
static const char *const device_keys[] = {"name", "peak_tflops",         "mem_bw_GBps", "mem_GB",
                                          "cost", "input_samples_per_s", NULL};
static const char *const peak_keys[] = {"fp32", "fp16", "bf16", "tf32", NULL};
static const char *const cost_keys[] = {"efficiency", "conv3x3_flop_ratio", "mem_efficiency",
                                        "launch_us",  "rnn_per_step",       "host_overhead_us",
                                        NULL};
static const char *const eff_keys[] = {"conv2d", "gemm", "attention", "lstm", "lstm_step", NULL};
_Static_assert(sizeof eff_keys / sizeof eff_keys[0] == SF_EFF_COUNT + 1, "one key per class");

/* {"fp32": x, "fp16": y, ...}: fractions by dtype, absent ones 0. */
static sf_status parse_by_dtype(reader *r, const json_t *obj, const char *parent, const char *key,
                                double *out) {
    char path[80];
    join_path(path, sizeof path, parent, key);
    if (!json_is_object(obj)) return field_error(r, SF_ERR_PARSE, parent, key, "must be an object");
    sf_status st = check_keys(r, obj, path, peak_keys);
    for (int t = 0; st == SF_OK && t < SF_DTYPE_COUNT; t++)
        st = get_num(r, obj, path, sf_dtype_name((sf_dtype)t), 0, NUM_FRACTION, 0, &out[t]);
    return st;
}

/* device.cost: the analytic model's figures for this device (docs/formats-machine.md). */
static sf_status parse_cost(reader *r, const json_t *c, sf_device_kind *k) {
    sf_status st = check_keys(r, c, "device.cost", cost_keys);
    const json_t *eff = json_object_get(c, "efficiency");
    if (st == SF_OK && eff) {
        if (!json_is_object(eff))
            return field_error(r, SF_ERR_PARSE, "device.cost", "efficiency", "must be an object");
        st = check_keys(r, eff, "device.cost.efficiency", eff_keys);
        for (int e = 0; st == SF_OK && e < SF_EFF_COUNT; e++) {
            const json_t *by = json_object_get(eff, eff_keys[e]);
            if (by)
                st = parse_by_dtype(r, by, "device.cost.efficiency", eff_keys[e], k->efficiency[e]);
        }
    }
    const json_t *w = json_object_get(c, "conv3x3_flop_ratio");
    if (st == SF_OK && w)
        st = parse_by_dtype(r, w, "device.cost", "conv3x3_flop_ratio", k->conv3x3_flop_ratio);
    if (st == SF_OK)
        st = get_num(r, c, "device.cost", "mem_efficiency", 0, NUM_FRACTION, 0, &k->mem_efficiency);
    if (st == SF_OK)
        st = get_num(r, c, "device.cost", "launch_us", 0, NUM_LATENCY, -6, &k->launch_s);
    if (st == SF_OK)
        st = get_num(r, c, "device.cost", "host_overhead_us", 0, NUM_LATENCY, -6,
                     &k->host_overhead_s);
    const json_t *ps = json_object_get(c, "rnn_per_step");
    if (st == SF_OK && ps) {
        if (!json_is_boolean(ps))
            return field_error(r, SF_ERR_PARSE, "device.cost", "rnn_per_step",
                               "must be true or false");
        k->rnn_per_step = json_is_true(ps);
    }
    return st;
}
static const char *const intra_keys[] = {"topology",   "bandwidth_GBps", "latency_us",
                                         "pcie_group", "pcie_up_GBps",   NULL};
static const char *const inter_keys[] = {"nics_per_node", "bandwidth_GBps", "latency_us", NULL};

static sf_status parse_device(reader *r, const json_t *dev, sf_device_kind *k) {
    sf_status st = check_keys(r, dev, "device", device_keys);
    if (st == SF_OK) st = get_name(r, dev, "device", "name", k->name, sizeof k->name);
    const json_t *peak = NULL;
    if (st == SF_OK) st = get_object(r, dev, "device", "peak_tflops", &peak);
    if (st == SF_OK) st = check_keys(r, peak, "device.peak_tflops", peak_keys);
    if (st == SF_OK)
        st = get_num(r, peak, "device.peak_tflops", "fp32", 1, NUM_RATE, 12,
                     &k->peak_flops[SF_DTYPE_FP32]);
    if (st == SF_OK)
        st = get_num(r, peak, "device.peak_tflops", "fp16", 0, NUM_RATE_OR_ZERO, 12,
                     &k->peak_flops[SF_DTYPE_FP16]);
    if (st == SF_OK)
        st = get_num(r, peak, "device.peak_tflops", "bf16", 0, NUM_RATE_OR_ZERO, 12,
                     &k->peak_flops[SF_DTYPE_BF16]);
    if (st == SF_OK)
        st = get_num(r, peak, "device.peak_tflops", "tf32", 0, NUM_RATE_OR_ZERO, 12,
                     &k->peak_flops[SF_DTYPE_TF32]);
    if (st == SF_OK) st = get_num(r, dev, "device", "mem_bw_GBps", 1, NUM_RATE, 9, &k->mem_bw_Bps);
    if (st == SF_OK) st = get_num(r, dev, "device", "mem_GB", 1, NUM_MEM, 9, &k->mem_bytes);
    if (st == SF_OK)
        st = get_num(r, dev, "device", "input_samples_per_s", 0, NUM_RATE_OR_ZERO, 0,
                     &k->input_samples_per_s);
    const json_t *cost = json_object_get(dev, "cost");
    if (st == SF_OK && cost) {
        if (!json_is_object(cost))
            return field_error(r, SF_ERR_PARSE, "device", "cost", "must be an object");
        st = parse_cost(r, cost, k);
    }
    return st;
}

static sf_status parse_intra(reader *r, const json_t *in, sf_machine_desc *d) {
    sf_status st = check_keys(r, in, "intra", intra_keys);
    const json_t *topo = NULL;
    if (st == SF_OK) topo = get(r, in, "intra", "topology", 1, &st);
    if (st != SF_OK) return st;
    if (!json_is_string(topo))
        return field_error(r, SF_ERR_PARSE, "intra", "topology", "must be a string");
    int found = -1;
    for (int t = 0; t < SF_INTRA_COUNT; t++)
        if (strcmp(json_string_value(topo), sf_intra_topology_name((sf_intra_topology)t)) == 0)
            found = t;
    if (found < 0) {
        char what[160];
        snprintf(what, sizeof what,
                 "unknown topology '%.40s' (expected pairwise, switch, pcie_tree or shm)",
                 json_string_value(topo));
        return field_error(r, SF_ERR_INVALID, "intra", "topology", what);
    }
    d->intra = (sf_intra_topology)found;
    st = get_num(r, in, "intra", "bandwidth_GBps", 1, NUM_RATE, 9, &d->intra_bw_Bps);
    if (st == SF_OK)
        st = get_num(r, in, "intra", "latency_us", 1, NUM_LATENCY, -6, &d->intra_latency_s);
    if (st != SF_OK) return st;
    int has_group = json_object_get(in, "pcie_group") != NULL;
    int has_up = json_object_get(in, "pcie_up_GBps") != NULL;
    if (d->intra != SF_INTRA_PCIE_TREE) {
        if (has_group || has_up)
            return field_error(r, SF_ERR_INVALID, "intra",
                               has_group ? "pcie_group" : "pcie_up_GBps",
                               "only allowed with topology 'pcie_tree'");
        return SF_OK;
    }
    st = get_int(r, in, "intra", "pcie_group", 1, d->devices_per_node, &d->pcie_group);
    if (st == SF_OK && d->devices_per_node % d->pcie_group != 0) {
        char what[96];
        snprintf(what, sizeof what, "%d does not divide devices_per_node (%d)", d->pcie_group,
                 d->devices_per_node);
        st = field_error(r, SF_ERR_INVALID, "intra", "pcie_group", what);
    }
    if (st == SF_OK)
        st = get_num(r, in, "intra", "pcie_up_GBps", 1, NUM_RATE, 9, &d->pcie_up_bw_Bps);
    return st;
}

static sf_status parse_root(reader *r, const json_t *root, sf_machine_desc *d) {
    if (!json_is_object(root))
        return sf_error_set(r->err, SF_ERR_PARSE, "%s: a machine must be a JSON object", r->origin);
    sf_status st = check_keys(r, root, "", top_keys);
    if (st == SF_OK) st = get_name(r, root, "", "name", d->name, sizeof d->name);
    if (st == SF_OK) st = get_int(r, root, "", "nodes", 1, SF_MAX_DEVICES, &d->nodes);
    if (st == SF_OK)
        st = get_int(r, root, "", "devices_per_node", 1, SF_MAX_DEVICES, &d->devices_per_node);
    const json_t *dev = NULL, *intra = NULL, *inter = NULL;
    if (st == SF_OK) st = get_object(r, root, "", "device", &dev);
    if (st == SF_OK) st = parse_device(r, dev, &d->kind);
    if (st == SF_OK) st = get_object(r, root, "", "intra", &intra);
    if (st == SF_OK) st = parse_intra(r, intra, d);
    if (st == SF_OK) st = get_object(r, root, "", "inter", &inter);
    if (st == SF_OK) st = check_keys(r, inter, "inter", inter_keys);
    if (st == SF_OK) st = get_int(r, inter, "inter", "nics_per_node", 1, 1024, &d->nics_per_node);
    if (st == SF_OK)
        st = get_num(r, inter, "inter", "bandwidth_GBps", 1, NUM_RATE, 9, &d->inter_bw_Bps);
    if (st == SF_OK)
        st = get_num(r, inter, "inter", "latency_us", 1, NUM_LATENCY, -6, &d->inter_latency_s);
    const json_t *rtm = json_object_get(root, "runtime");
    if (st == SF_OK && rtm) st = get_object(r, root, "", "runtime", &rtm);
    if (st == SF_OK && rtm) st = check_keys(r, rtm, "runtime", runtime_keys);
    if (st == SF_OK && rtm && json_object_get(rtm, "cores_per_node"))
        st = get_int(r, rtm, "runtime", "cores_per_node", 0, SF_MAX_DEVICES, &d->cores_per_node);
    if (st == SF_OK && rtm)
        st = get_num(r, rtm, "runtime", "copy_GBps", 0, NUM_RATE_OR_ZERO, 9, &d->copy_bw_Bps);
    if (st == SF_OK && rtm)
        st = get_num(r, rtm, "runtime", "copy_run_ns", 0, NUM_LATENCY, -9, &d->copy_run_s);
    const json_t *sab = rtm ? json_object_get(rtm, "sync_after_backward") : NULL;
    if (st == SF_OK && sab) {
        if (!json_is_boolean(sab))
            return field_error(r, SF_ERR_PARSE, "runtime", "sync_after_backward",
                               "must be true or false");
        d->sync_after_backward = json_is_true(sab);
    }
    if (st == SF_OK && rtm) st = parse_allreduce(r, rtm, d);
    if (st != SF_OK) return st;
    /* What the fields cannot say alone (the device count limit). */
    st = sf_machine_desc_validate(d, r->err);
    if (st != SF_OK) sf_error_prefix(r->err, "%s: ", r->origin);
    return st;
}

sf_status sf_machine_desc_parse_json(const char *text, const char *origin, sf_machine_desc *out,
                                     sf_error *err) {
    if (!origin) origin = "<machine>";
    if (!text || !out) return sf_error_set(err, SF_ERR_INVALID, "%s: no text to parse", origin);
    json_error_t jerr;
    json_t *root = json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sf_error_set(err, SF_ERR_PARSE, "%s:%d:%d: %s", origin, jerr.line, jerr.column,
                            jerr.text);
    sf_machine_desc d;
    memset(&d, 0, sizeof d);
    reader r = {origin, err};
    sf_status st = parse_root(&r, root, &d);
    json_decref(root);
    if (st == SF_OK) *out = d;
    return st;
}

sf_status sf_machine_desc_load_json(const char *path, sf_machine_desc *out, sf_error *err) {
    char *text = sf_read_file(path, NULL, err);
    if (!text) return err ? err->code : SF_ERR_IO;
    sf_status st = sf_machine_desc_parse_json(text, path, out, err);
    free(text);
    return st;
}

/* ---- writing ------------------------------------------------------------ */

typedef struct writer {
    int ok;
    int digits; /* the most significant digits any real needs */
} writer;

static void put(writer *w, json_t *obj, const char *key, json_t *v) {
    if (!v || json_object_set_new(obj, key, v) != 0) w->ok = 0;
}

static void put_num(writer *w, json_t *obj, const char *key, double x, int exp10) {
    double y = to_file_units(x, exp10);
    char buf[64];
    int p = shortest_digits(y, buf, sizeof buf);
    if (p > w->digits) w->digits = p;
    put(w, obj, key, json_real(y));
}

/* {"fp32": x, ...} of the dtypes whose figure is not 0; NULL when none is. */
static json_t *by_dtype(writer *w, const double *v) {
    json_t *o = NULL;
    for (int t = 0; t < SF_DTYPE_COUNT; t++) {
        if (v[t] == 0) continue;
        if (!o) o = json_object();
        if (!o) {
            w->ok = 0;
            return NULL;
        }
        put_num(w, o, sf_dtype_name((sf_dtype)t), v[t], 0);
    }
    return o;
}

/* device.cost, only the figures that are not the model's defaults (none: no
 * object, so a file of a machine without them is written as before). */
static void put_cost(writer *w, json_t *dev, const sf_device_kind *k) {
    json_t *c = json_object(), *eff = json_object();
    if (!c || !eff) {
        w->ok = 0;
        json_decref(c);
        json_decref(eff);
        return;
    }
    for (int e = 0; e < SF_EFF_COUNT; e++) {
        json_t *o = by_dtype(w, k->efficiency[e]);
        if (o) put(w, eff, eff_keys[e], o);
    }
    if (json_object_size(eff)) put(w, c, "efficiency", json_incref(eff));
    json_t *r = by_dtype(w, k->conv3x3_flop_ratio);
    if (r) put(w, c, "conv3x3_flop_ratio", r);
    if (k->mem_efficiency > 0) put_num(w, c, "mem_efficiency", k->mem_efficiency, 0);
    if (k->launch_s > 0) put_num(w, c, "launch_us", k->launch_s, -6);
    if (k->rnn_per_step) put(w, c, "rnn_per_step", json_true());
    if (k->host_overhead_s > 0) put_num(w, c, "host_overhead_us", k->host_overhead_s, -6);
    if (json_object_size(c)) put(w, dev, "cost", json_incref(c));
    json_decref(eff);
    json_decref(c);
}

char *sf_machine_desc_to_json(const sf_machine_desc *d, sf_error *err) {
    if (sf_machine_desc_validate(d, err) != SF_OK) return NULL;
    writer w = {1, 15};
    json_t *root = json_object(), *dev = json_object(), *peak = json_object();
    json_t *intra = json_object(), *inter = json_object();
    if (!root || !dev || !peak || !intra || !inter) w.ok = 0;
    if (w.ok) {
        put(&w, root, "name", json_string(d->name));
        put(&w, root, "nodes", json_integer(d->nodes));
        put(&w, root, "devices_per_node", json_integer(d->devices_per_node));
        put(&w, dev, "name", json_string(d->kind.name));
        put_num(&w, peak, "fp32", d->kind.peak_flops[SF_DTYPE_FP32], 12);
        put_num(&w, peak, "fp16", d->kind.peak_flops[SF_DTYPE_FP16], 12);
        put_num(&w, peak, "bf16", d->kind.peak_flops[SF_DTYPE_BF16], 12);
        if (d->kind.peak_flops[SF_DTYPE_TF32] > 0)
            put_num(&w, peak, "tf32", d->kind.peak_flops[SF_DTYPE_TF32], 12);
        put(&w, dev, "peak_tflops", json_incref(peak));
        put_num(&w, dev, "mem_bw_GBps", d->kind.mem_bw_Bps, 9);
        put_num(&w, dev, "mem_GB", d->kind.mem_bytes, 9);
        if (d->kind.input_samples_per_s > 0)
            put_num(&w, dev, "input_samples_per_s", d->kind.input_samples_per_s, 0);
        put_cost(&w, dev, &d->kind);
        put(&w, root, "device", json_incref(dev));
        put(&w, intra, "topology", json_string(sf_intra_topology_name(d->intra)));
        put_num(&w, intra, "bandwidth_GBps", d->intra_bw_Bps, 9);
        put_num(&w, intra, "latency_us", d->intra_latency_s, -6);
        if (d->intra == SF_INTRA_PCIE_TREE) {
            put(&w, intra, "pcie_group", json_integer(d->pcie_group));
            put_num(&w, intra, "pcie_up_GBps", d->pcie_up_bw_Bps, 9);
        }
        put(&w, root, "intra", json_incref(intra));
        put(&w, inter, "nics_per_node", json_integer(d->nics_per_node));
        put_num(&w, inter, "bandwidth_GBps", d->inter_bw_Bps, 9);
        put_num(&w, inter, "latency_us", d->inter_latency_s, -6);
        put(&w, root, "inter", json_incref(inter));
        int has_rt = d->cores_per_node || d->copy_bw_Bps > 0 || d->copy_run_s > 0 ||
                     d->sync_after_backward || d->n_sync > 0;
        json_t *rtm = has_rt ? json_object() : NULL;
        if (has_rt) put(&w, root, "runtime", rtm); /* root owns it now */
        if (rtm && d->cores_per_node)
            put(&w, rtm, "cores_per_node", json_integer(d->cores_per_node));
        if (rtm && d->copy_bw_Bps > 0) put_num(&w, rtm, "copy_GBps", d->copy_bw_Bps, 9);
        if (rtm && d->copy_run_s > 0) put_num(&w, rtm, "copy_run_ns", d->copy_run_s, -9);
        if (rtm && d->sync_after_backward) put(&w, rtm, "sync_after_backward", json_true());
        json_t *pts = rtm && d->n_sync > 0 ? json_array() : NULL;
        if (rtm && d->n_sync > 0) put(&w, rtm, "allreduce", pts);
        for (int i = 0; pts && i < d->n_sync; i++) {
            json_t *pt = json_object();
            if (!pt || json_array_append_new(pts, pt) != 0) { /* append frees pt on failure */
                w.ok = 0;
                break;
            }
            put_num(&w, pt, "bytes", d->sync_bytes[i], 0);
            put_num(&w, pt, "link_GBps", d->sync_bw_Bps[i], 9);
        }
    }
    char *text = NULL;
    if (w.ok) {
        char *dumped = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(w.digits));
        /* json_dumps allocates with jansson's allocator; hand back plain malloc
         * memory with a final newline so callers free() it and files end well. */
        if (dumped) {
            size_t n = strlen(dumped);
            text = malloc(n + 2);
            if (text) {
                memcpy(text, dumped, n);
                text[n] = '\n';
                text[n + 1] = '\0';
            }
            free(dumped);
        }
    }
    json_decref(peak);
    json_decref(dev);
    json_decref(intra);
    json_decref(inter);
    json_decref(root);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "machine '%s': out of memory", d->name);
    return text;
}

sf_status sf_machine_desc_save_json(const sf_machine_desc *d, const char *path, sf_error *err) {
    char *text = sf_machine_desc_to_json(d, err);
    if (!text) return err ? err->code : SF_ERR_NOMEM;
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

/* ---- presets or files ---------------------------------------------------- */

static int looks_like_path(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n >= 5 && strcmp(s + n - 5, ".json") == 0);
}

/* "p100-4x4[8]": the first 8 devices of a preset or file (sf_machine_subset). */
static sf_machine *open_subset(const char *spec, sf_error *err) {
    size_t n = strlen(spec);
    const char *lb = strrchr(spec, '[');
    char base[512];
    if (!lb || spec[n - 1] != ']' || (size_t)(lb - spec) >= sizeof base) return NULL;
    char *end;
    errno = 0;
    long k = strtol(lb + 1, &end, 10);
    if (lb[1] < '0' || lb[1] > '9' || end != spec + n - 1 || k < 1) {
        sf_error_set(err, SF_ERR_INVALID,
                     "machine '%s': the part in brackets must be a device "
                     "count, as in p100-4x4[8]",
                     spec);
        return NULL;
    }
    /* before the int conversion below: [4294967297] must not become [1] */
    if (errno == ERANGE || k > SF_MAX_DEVICES) {
        sf_error_set(err, SF_ERR_RANGE, "machine '%s': a machine has at most %d devices", spec,
                     SF_MAX_DEVICES);
        return NULL;
    }
    memcpy(base, spec, (size_t)(lb - spec));
    base[lb - spec] = '\0';
    sf_machine *whole = sf_machine_open(base, err);
    if (!whole) return NULL;
    sf_error local = {0};
    sf_machine *part = sf_machine_subset(whole, (int)k, &local);
    if (!part) {
        /* the subset names the machine by its "name" field, which for a file
         * is not what was typed: name the spec (the file and the count) */
        char pre[SF_NAME_MAX + 16];
        snprintf(pre, sizeof pre, "machine '%s': ", sf_machine_name(whole));
        const char *why = local.msg;
        if (strncmp(why, pre, strlen(pre)) == 0) why += strlen(pre);
        sf_error_set(err, local.code, "machine '%s': %s", spec, why);
    }
    sf_machine_free(whole);
    return part;
}

sf_machine *sf_machine_open(const char *name_or_path, sf_error *err) {
    if (!name_or_path || !name_or_path[0]) {
        sf_error_set(err, SF_ERR_INVALID, "no machine given (a preset name or a JSON file)");
        return NULL;
    }
    size_t len = strlen(name_or_path);
    if (name_or_path[len - 1] == ']' && strchr(name_or_path, '[')) {
        sf_error_clear(err);
        sf_machine *m = open_subset(name_or_path, err);
        if (m || (err && err->code != SF_OK)) return m;
    }
    sf_machine_desc d;
    if (looks_like_path(name_or_path)) {
        if (sf_machine_desc_load_json(name_or_path, &d, err) != SF_OK) return NULL;
        sf_machine *m = sf_machine_build(&d, err);
        if (!m) sf_error_prefix(err, "%s: ", name_or_path);
        return m;
    }
    /* A bare name is a preset; a file of that name in the working directory
     * is a second chance, so that "mymachine" works without "./". */
    sf_error perr = {0};
    if (sf_machine_preset_desc(name_or_path, &d, &perr) == SF_OK) return sf_machine_build(&d, err);
    FILE *f = fopen(name_or_path, "rb");
    if (!f) {
        sf_error_set(err, perr.code, "%s", perr.msg);
        return NULL;
    }
    fclose(f);
    if (sf_machine_desc_load_json(name_or_path, &d, err) != SF_OK) return NULL;
    return sf_machine_build(&d, err);
}
