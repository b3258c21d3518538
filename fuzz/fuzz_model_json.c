/*
 * fuzz_model_json.c - the model JSON reader (sf_model_parse_json, io.h) on any
 * text: an error, or a graph that writes, reads back and writes the same text
 * (docs/formats-model.md promises it byte for byte), and whose statistics
 * compute.
 */
#include "fuzz.h"
#include "soapflow/graph.h"
#include "soapflow/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return FUZZ_REJECT;
    sf_error err = {0};
    sf_graph *g = sf_model_parse_json(text, "model.json", &err);
    free(text);
    if (!g) {
        fuzz_check_error(err.code, &err, "model.json");
        return 0;
    }
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    char *j1 = sf_model_to_json(g, &err);
    FUZZ_CHECK(j1, "a model that was read does not write: %s", err.msg);
    sf_error err2 = {0};
    sf_graph *g2 = sf_model_parse_json(j1, "written.json", &err2);
    FUZZ_CHECK(g2, "what the writer wrote does not read back: %s\n%s", err2.msg, j1);
    char *j2 = sf_model_to_json(g2, &err2);
    FUZZ_CHECK(j2 && strcmp(j1, j2) == 0, "written twice, not the same text:\n%s\n%s", j1,
               j2 ? j2 : err2.msg);
    free(j2);
    free(j1);
    sf_graph_free(g2);
    sf_graph_free(g);
    return 0;
}
