/*
 * cmd_models.c - `soapflow models`: the names of the built-in models.
 *
 * The plain output is only the names, one a line, because scripts (and the
 * acceptance checks) loop over it: `for m in $(soapflow models); do ...`.
 * The summaries go to --long (a table for people) and --json (for programs).
 */
#include "cli.h"

#include "soapflow/models.h"

static int usage(FILE *out) {
    fputs("usage: soapflow models [--long | --json]\n"
          "\n"
          "List the built-in models (the zoo), one name a line.\n"
          "\n"
          "options:\n"
          "  -l, --long   a table of names and one-line summaries\n"
          "  --json       a JSON array of {\"name\", \"summary\"}\n"
          "  -h, --help   show this help\n"
          "\n"
          "example:\n"
          "  soapflow models --long\n"
          "  for m in $(soapflow models); do soapflow graph --model \"$m\" --batch 1; done\n",
          out);
    return SF_EXIT_OK;
}

static int print_json(void) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < sf_model_count(); i++) {
        json_t *o =
            json_pack("{s:s, s:s}", "name", sf_model_name(i), "summary", sf_model_summary(i));
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return sf_cli_print_json(arr);
}

static int print_long(void) {
    static const char *const headers[] = {"name", "summary"};
    sf_cli_table *t = sf_cli_table_new(2, headers, "ll");
    for (int i = 0; i < sf_model_count(); i++) {
        sf_cli_table_cell(t, "%s", sf_model_name(i));
        sf_cli_table_cell(t, "%s", sf_model_summary(i));
    }
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    return rc;
}

int sf_cmd_models(int argc, char **argv) {
    int json = 0, longer = 0;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return usage(stdout);
        if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
        if (sf_cli_flag(&a, "--long", "-l", &longer)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (json && longer) return sf_cli_usage_error(a.cmd, "--json and --long exclude each other");

    if (json) return print_json();
    if (longer) return print_long();
    for (int i = 0; i < sf_model_count(); i++) puts(sf_model_name(i));
    return SF_EXIT_OK;
}
