/*
 * trace.c - the measured timeline of one step as a Chrome trace, with the
 * tracks and names of the simulator's (sim_trace.c): a "devices" process
 * with a thread per rank, a "links" process with a thread per link used, and
 * tasks named "<op> fwd p<part>", "xfer <op> p<part>", "allreduce <op>", ...
 * Times are each rank's own clock from the start of its step; ranks start
 * their steps within a message latency of each other (the previous step ends
 * with a world-wide sum), which is the error of the common time axis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/runtime.h"

enum { PID_DEVICES = 1, PID_LINKS = 2 };

static const char *const cat[SF_RT_EVENT_KIND_COUNT] = {"fwd",  "bwd",  "update", "xfer",
                                                        "grad", "sync", "copy"};

static void meta(json_t *ev, const char *what, int pid, int tid, const char *name) {
    json_t *e = json_pack("{s:s,s:s,s:i,s:{s:s}}", "ph", "M", "name", what, "pid", pid, "args",
                          "name", name);
    if (tid >= 0) json_object_set_new(e, "tid", json_integer(tid));
    json_array_append_new(ev, e);
}

static void task(json_t *ev, const char *name, const char *c, int pid, int tid, double t0,
                 double t1, const char *op, int part, int64_t bytes) {
    json_t *e = json_pack("{s:s,s:s,s:s,s:i,s:i,s:f,s:f,s:{s:s,s:i}}", "ph", "X", "name", name,
                          "cat", c, "pid", pid, "tid", tid, "ts", t0 * 1e6, "dur", (t1 - t0) * 1e6,
                          "args", "op", op, "part", part);
    if (bytes) json_object_set_new(json_object_get(e, "args"), "bytes", json_integer(bytes));
    json_array_append_new(ev, e);
}

sf_status sf_runtime_write_trace(const char *path, const sf_graph *g, const sf_machine *m,
                                 int n_ranks, const sf_rt_event *const *events, const int *counts,
                                 sf_error *err) {
    int n_links = sf_machine_num_links(m);
    unsigned char *used = calloc((size_t)(n_links ? n_links : 1), 1);
    json_t *root = json_object(), *ev = json_array();
    if (!used || !root || !ev) {
        free(used);
        json_decref(root);
        json_decref(ev);
        return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory building the trace", path);
    }
    json_object_set_new(root, "displayTimeUnit", json_string("ms"));
    json_object_set_new(root, "otherData",
                        json_pack("{s:s,s:s,s:s}", "model", sf_graph_name(g), "machine",
                                  sf_machine_name(m), "measured", "soapflow train"));
    meta(ev, "process_name", PID_DEVICES, -1, "devices");
    meta(ev, "process_name", PID_LINKS, -1, "links");
    char name[200];
    for (int d = 0; d < n_ranks; d++) {
        const sf_device *dev = sf_machine_device(m, d);
        snprintf(name, sizeof name, "device %d (node %d)", d, dev ? dev->node : 0);
        meta(ev, "thread_name", PID_DEVICES, d, name);
    }
    for (int r = 0; r < n_ranks; r++) {
        for (int i = 0; i < counts[r]; i++) {
            const sf_rt_event *e = &events[r][i];
            const sf_op *op =
                e->op >= 0 && e->op < sf_graph_num_ops(g) ? sf_graph_op(g, e->op) : NULL;
            const char *on = op ? op->name : "?";
            switch (e->kind) {
            case SF_RT_FWD: snprintf(name, sizeof name, "%s fwd p%d", on, e->part); break;
            case SF_RT_BWD: snprintf(name, sizeof name, "%s bwd p%d", on, e->part); break;
            case SF_RT_UPDATE: snprintf(name, sizeof name, "update %s", on); break;
            case SF_RT_XFER: snprintf(name, sizeof name, "xfer %s p%d", on, e->part); break;
            case SF_RT_GRAD: snprintf(name, sizeof name, "grad %s p%d", on, e->part); break;
            case SF_RT_COPY: snprintf(name, sizeof name, "copy %s p%d", on, e->part); break;
            default: snprintf(name, sizeof name, "allreduce %s", on); break;
            }
            const char *c = e->kind < SF_RT_EVENT_KIND_COUNT ? cat[e->kind] : "?";
            if (e->kind == SF_RT_FWD || e->kind == SF_RT_BWD || e->kind == SF_RT_UPDATE ||
                e->kind == SF_RT_COPY) {
                task(ev, name, c, PID_DEVICES, r, e->t0_s, e->t1_s, on, e->part,
                     e->kind == SF_RT_COPY ? e->bytes : 0);
                continue;
            }
            /* a message: on every link of its route; an all-reduce: towards the next rank */
            int a = e->kind == SF_RT_SYNC ? r : e->peer;
            int b = e->kind == SF_RT_SYNC ? (r + 1) % n_ranks : r;
            if (a == b) continue;
            sf_route rt;
            sf_machine_route(m, a, b, &rt);
            for (int k = 0; k < rt.n_links; k++) {
                used[rt.links[k]] = 1;
                task(ev, name, c, PID_LINKS, rt.links[k], e->t0_s, e->t1_s, on, e->part, e->bytes);
            }
        }
    }
    for (int l = 0; l < n_links; l++) {
        if (!used[l]) continue;
        sf_link lb;
        const sf_link *lk = sf_machine_link(m, l, &lb);
        char lname[96];
        sf_machine_link_name(m, l, lname, sizeof lname);
        snprintf(name, sizeof name, "%s (%s)", lname, lk ? sf_link_type_name(lk->type) : "?");
        meta(ev, "thread_name", PID_LINKS, l, name);
    }
    free(used);
    json_object_set_new(root, "traceEvents", ev);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory writing the trace", path);
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

sf_status sf_runtime_write_measured_trace(sf_comm *c, const sf_runtime *rt, const char *path,
                                          const sf_graph *g, const sf_machine *m, sf_error *err) {
    int rank = sf_comm_rank(c), ranks = sf_comm_size(c);
    const sf_rt_event *mine;
    int n = sf_runtime_events(rt, &mine);
    sf_rt_event **all = calloc((size_t)ranks, sizeof *all);
    int *count = calloc((size_t)ranks, sizeof *count);
    sf_status st = all && count ? SF_OK : SF_ERR_NOMEM;
    for (int r = 0; r < ranks && st == SF_OK; r++) {
        int k = r == rank ? n : 0;
        st = sf_comm_bcast(c, &k, sizeof k, r);
        if (st != SF_OK) break;
        count[r] = k;
        all[r] = malloc((size_t)(k ? k : 1) * sizeof *all[r]);
        if (!all[r]) {
            st = SF_ERR_NOMEM; /* the others would wait: the step's agreement catches it */
            break;
        }
        if (r == rank) memcpy(all[r], mine, (size_t)k * sizeof *mine);
        st = sf_comm_bcast(c, all[r], (size_t)k * sizeof *all[r], r);
    }
    if (st == SF_OK && rank == 0)
        /* a pipeline's events name the copies of its micro-batch graph */
        st = sf_runtime_write_trace(path, sf_runtime_graph(rt) ? sf_runtime_graph(rt) : g, m,
                                    ranks, (const sf_rt_event *const *)all, count, err);
    for (int r = 0; all && r < ranks; r++) free(all[r]);
    free(all);
    free(count);
    return st;
}
