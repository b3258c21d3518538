/*
 * fuzz_costs_json.c - the costs file reader (sf_profile_db_parse_json, cost.h;
 * docs/formats-costs.md) on any text: an error, or a database whose every
 * entry looks itself up, and that writes, reads back and writes the same.
 */
#include "fuzz.h"
#include "soapflow/cost.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return FUZZ_REJECT;
    sf_error err = {0};
    sf_profile_db *db = sf_profile_db_parse_json(text, "costs.json", &err);
    free(text);
    if (!db) {
        fuzz_check_error(err.code, &err, "costs.json");
        return 0;
    }
    for (int i = 0; i < sf_profile_db_count(db); i++) {
        const sf_profile_entry *e = sf_profile_db_entry(db, i);
        FUZZ_CHECK(e && sf_profile_db_lookup(db, e->key) == e, "entry %d does not look itself up",
                   i);
        FUZZ_CHECK(e->fwd_s >= 0 && e->fwd_s <= SF_PROFILE_TIME_MAX_S && e->bwd_s >= 0 &&
                       e->bwd_s <= SF_PROFILE_TIME_MAX_S && e->reps >= 1,
                   "entry %d: %g s, %g s, %d reps", i, e->fwd_s, e->bwd_s, e->reps);
    }
    char *j1 = sf_profile_db_to_json(db, &err);
    FUZZ_CHECK(j1, "a database that was read does not write: %s", err.msg);
    sf_error err2 = {0};
    sf_profile_db *db2 = sf_profile_db_parse_json(j1, "written.json", &err2);
    FUZZ_CHECK(db2, "what the writer wrote does not read back: %s\n%s", err2.msg, j1);
    FUZZ_CHECK(sf_profile_db_count(db2) == sf_profile_db_count(db), "%d entries, read back %d",
               sf_profile_db_count(db), sf_profile_db_count(db2));
    char *j2 = sf_profile_db_to_json(db2, &err2);
    FUZZ_CHECK(j2 && strcmp(j1, j2) == 0, "written twice, not the same text:\n%s\n%s", j1,
               j2 ? j2 : err2.msg);
    free(j2);
    free(j1);
    sf_profile_db_free(db2);
    sf_profile_db_free(db);
    return 0;
}
