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

/* owned: the caller's buffer holding data, freed once decoded (protobuf-c
 * copies what it keeps), so a large file is not held twice for long. */
static sf_status parse(const void *data, size_t len, const char *origin, const char *dir,
                       int64_t batch, sf_graph **g, float ***weights, void *owned, sf_error *err) {
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

sf_status sf_onnx_parse(const void *data, size_t len, const char *origin, int64_t batch,
                        sf_graph **g, float ***weights, sf_error *err) {
    return parse(data, len, origin, NULL, batch, g, weights, NULL, err);
}

sf_status sf_onnx_load(const char *path, int64_t batch, sf_graph **g, float ***weights,
                       sf_error *err) {
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "sf_onnx_load: no path");
    size_t len = 0;
    void *buf = sf_read_file_bytes(path, SF_READ_FILE_MAX, &len, err);
    if (!buf) return err && err->code ? err->code : SF_ERR_IO;
    /* the folder external data is read from: the path up to its last '/' */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    char *dir = malloc(dl + 2);
    if (!dir) {
        free(buf);
        return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(dir, slash ? path : ".", dl);
    if (slash && dl == 0) dir[dl++] = '/'; /* a file in / */
    dir[dl] = '\0';
    sf_status st = parse(buf, len, path, dir, batch, g, weights, buf, err);
    free(dir);
    return st;
}

int sf_onnx_is_path(const char *name) {
    size_t n = name ? strlen(name) : 0;
    return n >= 5 && strcmp(name + n - 5, ".onnx") == 0;
}
