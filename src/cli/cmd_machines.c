/*
 * cmd_machines.c - `soapflow machines`: the machine presets, or machine files.
 *
 * Figures are shown in the units of data sheets (decimal TFLOP/s, GB, GB/s)
 * since that is where users check them; --json gives the raw SI values of
 * the description (bytes, bytes/s, seconds) so that nothing is rounded away.
 * Only descriptions are read: a machine is not built (routes are not
 * computed) just to be listed.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static int usage(FILE *out) {
    fputs("usage: soapflow machines [--long | --json] [NAME|FILE ...]\n"
          "\n"
          "List the built-in machine presets, or describe the named presets and\n"
          "machine JSON files (see docs/formats-machine.md).\n"
          "\n"
          "options:\n"
          "  -l, --long   add each preset's one-line summary\n"
          "  --json       a JSON array of objects: name, devices, nodes, devices_per_node,\n"
          "               device, peak_flops_fp32/fp16/bf16 (FLOP/s), mem_bw_Bps, mem_bytes,\n"
          "               intra, intra_bw_Bps, intra_latency_s (pcie_tree: also pcie_group,\n"
          "               pcie_up_bw_Bps), nics_per_node, inter_bw_Bps, inter_latency_s;\n"
          "               with a runtime object (calibrate): cores_per_node, copy_bw_Bps,\n"
          "               allreduce [{bytes, link_bw_Bps}]\n"
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

static json_t *desc_json(const sf_machine_desc *d) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    bad |= json_object_set_new(o, "name", json_string(d->name));
    bad |=
        json_object_set_new(o, "devices", json_integer((json_int_t)d->nodes * d->devices_per_node));
    bad |= json_object_set_new(o, "nodes", json_integer(d->nodes));
    bad |= json_object_set_new(o, "devices_per_node", json_integer(d->devices_per_node));
    bad |= json_object_set_new(o, "device", json_string(d->kind.name));
    bad |= sf_cli_json_set_real(o, "peak_flops_fp32", d->kind.peak_flops[SF_DTYPE_FP32]);
    bad |= sf_cli_json_set_real(o, "peak_flops_fp16", d->kind.peak_flops[SF_DTYPE_FP16]);
    bad |= sf_cli_json_set_real(o, "peak_flops_bf16", d->kind.peak_flops[SF_DTYPE_BF16]);
    bad |= sf_cli_json_set_real(o, "mem_bw_Bps", d->kind.mem_bw_Bps);
    bad |= sf_cli_json_set_real(o, "mem_bytes", d->kind.mem_bytes);
    bad |= json_object_set_new(o, "intra", json_string(sf_intra_topology_name(d->intra)));
    bad |= sf_cli_json_set_real(o, "intra_bw_Bps", d->intra_bw_Bps);
    bad |= sf_cli_json_set_real(o, "intra_latency_s", d->intra_latency_s);
    if (d->intra == SF_INTRA_PCIE_TREE) {
        bad |= json_object_set_new(o, "pcie_group", json_integer(d->pcie_group));
        bad |= sf_cli_json_set_real(o, "pcie_up_bw_Bps", d->pcie_up_bw_Bps);
    }
    bad |= json_object_set_new(o, "nics_per_node", json_integer(d->nics_per_node));
    bad |= sf_cli_json_set_real(o, "inter_bw_Bps", d->inter_bw_Bps);
    bad |= sf_cli_json_set_real(o, "inter_latency_s", d->inter_latency_s);
    if (d->cores_per_node)
        bad |= json_object_set_new(o, "cores_per_node", json_integer(d->cores_per_node));
    if (d->copy_bw_Bps > 0) bad |= sf_cli_json_set_real(o, "copy_bw_Bps", d->copy_bw_Bps);
    if (d->n_sync > 0) {
        json_t *a = json_array();
        for (int i = 0; a && i < d->n_sync; i++)
            bad |= json_array_append_new(
                a, json_pack("{s:o,s:o}", "bytes", sf_cli_json_real(d->sync_bytes[i]),
                             "link_bw_Bps", sf_cli_json_real(d->sync_bw_Bps[i])));
        bad |= a ? json_object_set_new(o, "allreduce", a) : -1;
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
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
        json_t *arr = json_array();
        for (int i = 0; arr && i < count; i++) {
            json_t *o = desc_json(&descs[i]);
            if (!o || json_array_append_new(arr, o) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        rc = sf_cli_print_json(arr);
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
