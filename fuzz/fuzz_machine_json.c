/*
 * fuzz_machine_json.c - the machine JSON reader on any text, as sf_machine_open
 * uses it: sf_machine_desc_parse_json, then sf_machine_build on what it read.
 * Either is an error, or the machine builds and its description writes, reads
 * back and writes the same text.
 */
#include "fuzz.h"
#include "soapflow/io.h"
#include "soapflow/machine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return FUZZ_REJECT;
    sf_error err = {0};
    sf_machine_desc d;
    sf_status st = sf_machine_desc_parse_json(text, "machine.json", &d, &err);
    free(text);
    if (st != SF_OK) {
        fuzz_check_error(st, &err, "machine.json");
        return 0;
    }
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) {
        FUZZ_CHECK(err.code < 0 && err.msg[0] && !strchr(err.msg, '\n'), "build: %d \"%s\"",
                   (int)err.code, err.msg);
        return 0;
    }
    char *j1 = sf_machine_desc_to_json(sf_machine_get_desc(m), &err);
    FUZZ_CHECK(j1, "a machine that was built does not write: %s", err.msg);
    sf_error err2 = {0};
    sf_machine_desc d2;
    FUZZ_CHECK(sf_machine_desc_parse_json(j1, "written.json", &d2, &err2) == SF_OK,
               "what the writer wrote does not read back: %s\n%s", err2.msg, j1);
    sf_machine *m2 = sf_machine_build(&d2, &err2);
    FUZZ_CHECK(m2, "what the writer wrote does not build: %s\n%s", err2.msg, j1);
    char *j2 = sf_machine_desc_to_json(sf_machine_get_desc(m2), &err2);
    FUZZ_CHECK(j2 && strcmp(j1, j2) == 0, "written twice, not the same text:\n%s\n%s", j1,
               j2 ? j2 : err2.msg);
    free(j2);
    free(j1);
    sf_machine_free(m2);
    sf_machine_free(m);
    return 0;
}
