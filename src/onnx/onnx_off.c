/*
 * onnx_off.c - the ONNX import functions of io.h in a build without ONNX
 * (SF_WITH_ONNX=OFF, no protobuf-c): each load fails with one line that says
 * why, so the CLI and every other caller report it as they report any bad
 * model file, and a program that links the planning library links either way.
 * CMakeLists.txt compiles this file instead of the importer, never beside it.
 */
#include <stdlib.h>
#include <string.h>

#include "soapflow/io.h"

static sf_status without_onnx(const char *what, sf_error *err) {
    return sf_error_set(err, SF_ERR_UNSUPPORTED,
                        "%.200s: soapflow was built without ONNX support (SF_WITH_ONNX=OFF)", what);
}

sf_status sf_onnx_load(const char *path, int64_t batch, sf_graph **g, float ***weights,
                       sf_error *err) {
    (void)batch;
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    return without_onnx(path ? path : "sf_onnx_load", err);
}

sf_status sf_onnx_parse(const void *data, size_t len, const char *origin, int64_t batch,
                        sf_graph **g, float ***weights, sf_error *err) {
    (void)data, (void)len, (void)batch;
    if (g) *g = NULL;
    if (weights) *weights = NULL;
    return without_onnx(origin ? origin : "<onnx>", err);
}

sf_status sf_onnx_load_opts(const char *path, int64_t batch, const sf_onnx_options *o,
                            sf_graph **g, float ***weights, sf_error *err) {
    (void)o;
    return sf_onnx_load(path, batch, g, weights, err);
}

sf_status sf_onnx_parse_opts(const void *data, size_t len, const char *origin, int64_t batch,
                             const sf_onnx_options *o, sf_graph **g, float ***weights,
                             sf_error *err) {
    (void)o;
    return sf_onnx_parse(data, len, origin, batch, g, weights, err);
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

void sf_onnx_weights_free(const sf_graph *g, float **weights) {
    (void)g;
    free(weights); /* never made here; NULL */
}

/* Still recognized, so that a .onnx model is refused with the reason above
 * rather than looked up as a zoo name. */
int sf_onnx_is_path(const char *name) {
    size_t n = name ? strlen(name) : 0;
    return n >= 5 && strcmp(name + n - 5, ".onnx") == 0;
}
