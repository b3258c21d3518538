/*
 * cmd_machines.c - `soapflow machines`: the machine presets, or machine files.
 *
 * Figures are shown in the units of data sheets (decimal TFLOP/s, GB, GB/s)
 * since that is where users check them. --json prints each machine as the
 * machine writer writes a machine file (sf_machine_desc_to_json,
 * docs/formats-machine.md), in a JSON array: every element is a file that
 * --machine reads back to the same machine, so there is one dialect of a
 * machine in JSON, not two. Only descriptions are read: a machine is not
 * built (routes are not computed) just to be listed.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "soapflow/io.h"

static int usage(FILE *out) {
    fputs("usage: soapflow machines [--long | --json] [NAME|FILE ...]\n"
          "\n"
          "List the built-in machine presets, or describe the named presets and\n"
          "machine JSON files (see docs/formats-machine.md).\n"
          "\n"
          "options:\n"
          "  -l, --long   add each preset's one-line summary\n"
          "  --json       a JSON array of machine files, one a machine, as calibrate\n"
          "               writes them (docs/formats-machine.md): each element, saved\n"
          "               alone, is a file that --machine reads as the same machine\n"
          "  -h, --help   show this help\n"
          "\n"
          "columns: intra and inter bandwidths are per link each way (inter: per NIC;\n"
          "'8 x 25' is 8 NICs of 25 GB/s per node).\n"
          "\n"
          "example:\n"
          "  soapflow machines\n"
          "  soapflow machines --json p100-4x4 my-cluster.json\n",
          out);
    return SF_EXIT_OK;
}

static const char *preset_summary(const char *name) {
    for (int i = 0; i < sf_machine_preset_count(); i++)
        if (strcmp(sf_machine_preset_name(i), name) == 0) return sf_machine_preset_summary(i);
    return "";
}

/* The machine files of descs[0 .. n) as one JSON array: each file's text as
 * the writer made it (its shortest exact numbers, not a reprint at 17
 * digits), indented one level. NULL (err set) when a description is invalid
 * or memory runs out. */
static char *descs_json(const sf_machine_desc *descs, int n, sf_error *err) {
    sf_strbuf b = {0};
    sf_strbuf_puts(&b, "[");
    for (int i = 0; i < n; i++) {
        char *text = sf_machine_desc_to_json(&descs[i], err);
        if (!text) {
            sf_strbuf_free(&b);
            return NULL;
        }
        size_t len = strlen(text);
        if (len > 0 && text[len - 1] == '\n') text[--len] = '\0'; /* the file's last newline */
        sf_strbuf_puts(&b, i ? ",\n  " : "\n  ");
        for (const char *c = text, *nl; *c; c = nl + 1) {
            nl = strchr(c, '\n');
            if (!nl) {
                sf_strbuf_puts(&b, c);
                break;
            }
            sf_strbuf_add(&b, c, (size_t)(nl - c));
            sf_strbuf_puts(&b, "\n  ");
        }
        free(text);
    }
    sf_strbuf_puts(&b, n ? "\n]\n" : "]\n");
    char *out = sf_strbuf_take(&b);
    if (!out) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return out;
}

/* Bandwidth in GB/s with as few digits as the figure needs ("20", "12.5"). */
static void fmt_GBps(double Bps, char *buf, size_t n) { snprintf(buf, n, "%.4g", Bps / 1e9); }

static void table_row(sf_cli_table *t, const sf_machine_desc *d, int longer) {
    char intra[32], inter[48], per_nic[32];
    fmt_GBps(d->intra_bw_Bps, intra, sizeof intra);
    fmt_GBps(d->inter_bw_Bps, per_nic, sizeof per_nic);
    if (d->nics_per_node > 1)
        snprintf(inter, sizeof inter, "%d x %s", d->nics_per_node, per_nic);
    else
        snprintf(inter, sizeof inter, "%s", per_nic);
    sf_cli_table_cell(t, "%s", d->name);
    sf_cli_table_cell(t, "%lld", (long long)d->nodes * d->devices_per_node);
    sf_cli_table_cell(t, "%d", d->nodes);
    sf_cli_table_cell(t, "%s", d->kind.name);
    sf_cli_table_cell(t, "%.4g", d->kind.peak_flops[SF_DTYPE_FP32] / 1e12);
    sf_cli_table_cell(t, "%.4g", d->kind.mem_bytes / 1e9);
    sf_cli_table_cell(t, "%s", sf_intra_topology_name(d->intra));
    sf_cli_table_cell(t, "%s", intra);
    sf_cli_table_cell(t, "%s", inter);
    if (longer) sf_cli_table_cell(t, "%s", preset_summary(d->name));
}

int sf_cmd_machines(int argc, char **argv) {
    int json = 0, longer = 0, n_named = 0;
    const char *named[64];
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        const char *name;
        if (sf_cli_help(&a)) return usage(stdout);
        if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
        if (sf_cli_flag(&a, "--long", "-l", &longer)) continue;
        if (sf_cli_positional(&a, &name)) {
            if (n_named == (int)(sizeof named / sizeof named[0]))
                return sf_cli_usage_error(a.cmd, "at most %d machines at a time", n_named);
            named[n_named++] = name;
            continue;
        }
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (json && longer) return sf_cli_usage_error(a.cmd, "--json and --long exclude each other");

    int count = n_named ? n_named : sf_machine_preset_count();
    sf_machine_desc *descs = calloc((size_t)count, sizeof *descs);
    if (!descs) return sf_cli_fail("out of memory");
    for (int i = 0; i < count; i++) {
        sf_error err = {0};
        const char *name = n_named ? named[i] : sf_machine_preset_name(i);
        if (sf_cli_machine_desc(name, &descs[i], &err) != SF_OK) {
            free(descs);
            return sf_cli_fail_err(&err);
        }
    }

    int rc;
    if (json) {
        sf_error err = {0};
        char *text = descs_json(descs, count, &err);
        if (text) {
            fputs(text, stdout);
            free(text);
            rc = SF_EXIT_OK;
        } else {
            rc = sf_cli_fail_err(&err);
        }
    } else {
        static const char *const headers[] = {"name",         "devices", "nodes", "device",
                                              "fp32 TFLOP/s", "mem GB",  "intra", "intra GB/s",
                                              "inter GB/s",   "summary"};
        sf_cli_table *t = sf_cli_table_new(longer ? 10 : 9, headers, "lrrlrrlrrl");
        for (int i = 0; i < count; i++) table_row(t, &descs[i], longer);
        rc = sf_cli_table_print(t, stdout);
        sf_cli_table_free(t);
    }
    free(descs);
    return rc;
}
