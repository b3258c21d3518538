/*
 * onnx.c - ONNX model files into soapflow graphs (docs/formats-onnx.md).
 *
 *     sf_graph *g; float **w;
 *     if (sf_onnx_load("resnet18.onnx", 64, &g, &w, &err) != SF_OK) ...
 *
 * The file is decoded by protobuf-c, with C code generated at build time from
 * the onnx.proto that Debian's libonnx-dev ships (CMakeLists.txt), so the reader
 * follows the format's own definition rather than a hand-written subset of it.
 * What protobuf-c refuses is explained by onnx_wire.c (byte offset, field and
 * node); what it accepts is checked here (a graph, an opset soapflow reads) and
 * turned into a graph by onnx_graph.c with the node handlers of onnx_ops.c,
 * onnx_fold.c and onnx_attn.c.
 *
 * Alternatives rejected: onnx's own C++ library (libonnx) would bring C++ into
 * a C tree and checks a different thing (the ONNX standard's validity) from
 * what matters here (whether soapflow can plan the model); a hand-written
 * protobuf reader is the fuzzing target that protoc-c's generated code does not
 * need to be.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

/* The ModelProto of len bytes, or the reason there is none. protobuf-c checks
 * every length against what is left of its input before it allocates, so a
 * hostile length field cannot make it ask for more than the input holds. */
static sf_status decode(const uint8_t *buf, size_t len, const char *origin, Onnx__ModelProto **out,
                        sf_error *err) {
    *out = NULL;
    if (len == 0)
        return sf_error_set(err, SF_ERR_PARSE, "%s: empty file, not an ONNX model", origin);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    if (!m) {
        if (ox_wire_check(buf, len, origin, err) != SF_OK) return err ? err->code : SF_ERR_PARSE;
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: not a valid ONNX model (the protobuf decoder refused it: out of "
                            "memory, or a field of a type it does not accept)",
                            origin);
    }
    *out = m;
    return SF_OK;
}

static sf_status check_model(ox_ctx *c) {
    const Onnx__ModelProto *m = c->model;
    if (!m->graph)
        return sf_error_set(c->err, SF_ERR_PARSE,
                            "%s: no graph: not an ONNX model (or an empty one)", c->origin);
    int64_t opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
            opset = o->has_version ? o->version : 1;
    }
    if (opset < 0) {
        /* IR version 2 files may leave it out; they are opset 1 to 6 */
        return sf_error_set(c->err, SF_ERR_UNSUPPORTED,
                            "%s: no opset for the default ONNX domain; soapflow reads opsets %d "
                            "to %d",
                            c->origin, OX_OPSET_MIN, OX_OPSET_MAX);
    }
    if (opset < OX_OPSET_MIN || opset > OX_OPSET_MAX)
        return sf_error_set(c->err, SF_ERR_UNSUPPORTED,
                            "%s: opset %lld is not supported (soapflow reads opsets %d to %d; "
                            "re-export with opset_version in that range)",
                            c->origin, (long long)opset, OX_OPSET_MIN, OX_OPSET_MAX);
    c->opset = opset;
    return SF_OK;
}

void sf_onnx_weights_free(const sf_graph *g, float **weights) {
    if (!weights) return;
    for (int i = 0; g && i < sf_graph_num_ops(g); i++) free(weights[i]);
    free(weights);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *sf_onnx_buffers_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (sf_onnx_is_path(path)) n -= 5;
    char *s = malloc(n + sizeof ".buffers.json");
    if (!s) return NULL;
    if (n) memcpy(s, path, n);
    memcpy(s + n, ".buffers.json", sizeof ".buffers.json");
    return s;
}

/* The buffer names: those of the file (a JSON array of strings; a missing file
 * is an error unless optional), then o's; sorted, into *names (one block: the
 * pointers, then the strings), *n. */
static sf_status read_buffers(const char *file, int optional, const sf_onnx_options *o,
                              const char *origin, const char ***names, int *n, sf_error *err) {
    *names = NULL;
    *n = 0;
    json_t *arr = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f && optional) {
            file = NULL;
        } else if (!f) {
            return sf_error_set(err, SF_ERR_IO, "%s: cannot read the buffers file %s", origin,
                                file);
        } else {
            json_error_t je;
            arr = json_loadf(f, 0, &je);
            fclose(f);
            if (!arr)
                return sf_error_set(err, SF_ERR_PARSE, "%s: line %d: %s (a buffers file is a JSON "
                                    "array of initializer names)", file, je.line, je.text);
            size_t i;
            json_t *v;
            int ok = json_is_array(arr) && json_array_size(arr) < (1u << 24);
            json_array_foreach(arr, i, v) ok = ok && json_is_string(v);
            if (!ok) {
                json_decref(arr);
                return sf_error_set(err, SF_ERR_PARSE,
                                    "%s: not a JSON array of initializer names (strings)", file);
            }
        }
    }
    size_t nf = arr ? json_array_size(arr) : 0, no = o && o->buffers ? (size_t)o->n_buffers : 0;
    size_t total = nf + no, bytes = 0;
    for (size_t i = 0; i < nf; i++) bytes += strlen(json_string_value(json_array_get(arr, i))) + 1;
    for (size_t i = 0; i < no; i++) bytes += o->buffers[i] ? strlen(o->buffers[i]) + 1 : 1;
    if (total == 0) {
        json_decref(arr);
        return SF_OK;
    }
    char **out = malloc(total * sizeof *out + bytes);
    if (!out) {
        json_decref(arr);
        return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", origin);
    }
    char *p = (char *)(out + total);
    for (size_t i = 0; i < total; i++) {
        const char *s = i < nf ? json_string_value(json_array_get(arr, i)) : o->buffers[i - nf];
        if (!s) s = "";
        size_t l = strlen(s) + 1;
        memcpy(p, s, l);
        out[i] = p;
        p += l;
    }
    json_decref(arr);
    qsort(out, total, sizeof *out, cmp_str);
    *names = (const char **)out;
    *n = (int)total;
    return SF_OK;
}

/* owned: the caller's buffer holding data, freed once decoded (protobuf-c
 * copies what it keeps), so a large file is not held twice for long. */
static sf_status parse(const void *data, size_t len, const char *origin, const char *dir,
                       int64_t batch, const char **buffers, int n_buffers, sf_graph **g,
                       float ***weights, void *owned, sf_error *err) {
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    if (!origin) origin = "<onnx>";
    if (!g || (!data && len)) {
        free(owned);
        return sf_error_set(err, SF_ERR_INVALID, "sf_onnx_parse: no data or no graph pointer");
    }
    Onnx__ModelProto *m;
    sf_status st = decode(data, len, origin, &m, err);
    free(owned);
    if (st != SF_OK) return st;
    ox_ctx c;
    memset(&c, 0, sizeof c);
    c.origin = origin;
    c.dir = dir;
    c.err = err;
    c.model = m;
    c.graph = m->graph;
    c.batch = batch;
    c.cur_node = -1;
    c.want_weights = weights != NULL;
    c.buffers = buffers;
    c.n_buffers = n_buffers;
    st = check_model(&c);
    if (st == SF_OK) st = ox_import_graph(&c);
    if (st == SF_OK) {
        *g = c.g;
        int n = sf_graph_num_ops(c.g);
        if (weights && !c.weights_missing) {
            /* exactly one entry per operator, as sf_params_new makes them */
            float **w = realloc(c.w, (size_t)(n ? n : 1) * sizeof *w);
            if (!w) {
                st = sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", origin);
            } else {
                for (int i = c.cap_w; i < n; i++) w[i] = NULL;
                *weights = w;
                c.w = NULL;
            }
        }
        if (st != SF_OK) {
            sf_graph_free(c.g);
            *g = NULL;
        }
    } else {
        sf_graph_free(c.g);
    }
    if (c.w) {
        for (int i = 0; i < c.cap_w; i++) free(c.w[i]);
        free(c.w);
    }
    ox_ctx_free(&c);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st != SF_OK && err && err->code == SF_OK)
        sf_error_set(err, st, "%s: %s", origin, sf_status_str(st));
    return st;
}

sf_status sf_onnx_parse_opts(const void *data, size_t len, const char *origin, int64_t batch,
                             const sf_onnx_options *o, sf_graph **g, float ***weights,
                             sf_error *err) {
    const char **names;
    int n;
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    sf_status st = read_buffers(o ? o->buffers_file : NULL, 0, o, origin ? origin : "<onnx>",
                                &names, &n, err);
    if (st != SF_OK) return st;
    st = parse(data, len, origin, NULL, batch, names, n, g, weights, NULL, err);
    free(names);
    return st;
}

sf_status sf_onnx_parse(const void *data, size_t len, const char *origin, int64_t batch,
                        sf_graph **g, float ***weights, sf_error *err) {
    return sf_onnx_parse_opts(data, len, origin, batch, NULL, g, weights, err);
}

sf_status sf_onnx_load(const char *path, int64_t batch, sf_graph **g, float ***weights,
                       sf_error *err) {
    return sf_onnx_load_opts(path, batch, NULL, g, weights, err);
}

sf_status sf_onnx_load_opts(const char *path, int64_t batch, const sf_onnx_options *o,
                            sf_graph **g, float ***weights, sf_error *err) {
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "sf_onnx_load: no path");
    /* the registered buffers: the file given, else the sidecar when there is one */
    char *side = o && o->buffers_file ? NULL : sf_onnx_buffers_path(path);
    if (!side && !(o && o->buffers_file)) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    const char **names;
    int n;
    sf_status st = read_buffers(side ? side : o->buffers_file, side != NULL, o, path, &names, &n,
                                err);
    free(side);
    if (st != SF_OK) return st;
    size_t len = 0;
    void *buf = sf_read_file_bytes(path, SF_READ_FILE_MAX, &len, err);
    if (!buf) {
        free(names);
        return err && err->code ? err->code : SF_ERR_IO;
    }
    /* the folder external data is read from: the path up to its last '/' */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    char *dir = malloc(dl + 2);
    if (!dir) {
        free(buf);
        free(names);
        return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(dir, slash ? path : ".", dl);
    if (slash && dl == 0) dir[dl++] = '/'; /* a file in / */
    dir[dl] = '\0';
    st = parse(buf, len, path, dir, batch, names, n, g, weights, buf, err);
    free(dir);
    free(names);
    return st;
}

int sf_onnx_is_path(const char *name) {
    size_t n = name ? strlen(name) : 0;
    return n >= 5 && strcmp(name + n - 5, ".onnx") == 0;
}
