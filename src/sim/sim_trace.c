/*
 * sim_trace.c - pictures of the last simulated schedule: a Chrome trace (JSON)
 * and an SVG Gantt chart.
 *
 * Both read the flat task graph the scheduler leaves behind (sim->lay: res[]
 * per slot; sim->cur: start[], finish[]), visiting every block's slots in
 * canonical order, and name each task from its block record (sim_task_of:
 * kind, operator, part). Barriers hold no resource and take no
 * time, so they are left out of both pictures.
 *
 * The trace follows the Trace Event Format that chrome://tracing and Perfetto
 * read: complete ("X") events with microsecond timestamps, one thread per
 * device in a "devices" process and one per used link in a "links" process,
 * named by metadata ("M") events. Perfetto then shows a track per resource,
 * which is exactly the simulator's model: every device and every link runs one
 * task at a time.
 *
 * The SVG is a fixed-width Gantt chart (about 1600 px) that opens in any
 * browser: a row per device and per used link, a time axis in milliseconds,
 * tasks coloured by kind, each with a <title> tooltip. A schedule of 100k tasks
 * squeezed into ~1400 px has many tasks narrower than a pixel; consecutive
 * sub-pixel tasks of one kind on one row are drawn as one rectangle (its
 * tooltip says how many it holds), which bounds the file by the pixels rather
 * than the tasks and loses nothing one could see. Colours live in a <style>
 * block (one class per kind) so that a rectangle costs ~100 bytes.
 *
 * Both are built in memory (sf_sim_trace_to_json, sf_sim_to_svg) and written
 * with sf_write_file_atomic, so a failure never leaves half a picture; a
 * caller that writes several files at once takes the text and writes them
 * together (sf_write_files_atomic). Text is built in an sf_strbuf, whose
 * out-of-memory state is sticky (checked once at the end).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"
#include "soapflow/io.h"

/* ---- escaping for the two formats -------------------------------------------- */

/* s as the inside of a JSON string. */
static void put_json_text(sf_strbuf *b, const char *s) {
    const char *run = s; /* start of the characters that need no escape */
    for (;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c != 0 && c != '"' && c != '\\' && c >= 0x20) continue;
        if (s > run) sf_strbuf_add(b, run, (size_t)(s - run));
        if (c == 0) return;
        if (c == '"' || c == '\\')
            sf_strbuf_printf(b, "\\%c", c);
        else
            sf_strbuf_printf(b, "\\u%04x", c);
        run = s + 1;
    }
}

/* XML text goes through sf_strbuf_put_xml, the one XML escape of every SVG writer. */

/* ---- what both pictures share ------------------------------------------------- */

/* Messages without a path: the writers below and a caller that writes the text
 * itself (the CLI, which writes all its files as one group) put it in front. */
static sf_status check_schedule(const sf_sim *sim, sf_error *err) {
    if (!sim) return sf_error_set(err, SF_ERR_INVALID, "no simulator, no schedule to draw");
    if (!sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "nothing simulated yet, no schedule to draw");
    if (!sim->opt.keep_schedule)
        return sf_error_set(err, SF_ERR_INVALID,
                            "the simulator was made without keep_schedule, no task times kept");
    if (sim->in_pipe && !sim->pipe)
        return sf_error_set(err, SF_ERR_INVALID,
                            "the pipeline took the fast path, which keeps no task times "
                            "(simulate it without pipeline_fast)");
    return SF_OK;
}

/* The text b holds, taken (NULL after out of memory, which b remembers). */
static char *take_text(sf_strbuf *b, const char *what, sf_error *err) {
    char *text = sf_strbuf_take(b);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory building the %s", what);
    return text;
}

/* Write a picture's text to path, with path in front of every message. */
static sf_status write_text(const char *path, char *(*build)(const sf_sim *, sf_error *),
                            const sf_sim *sim, sf_error *err) {
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "no path to write the schedule to");
    sf_error local = {0};
    char *text = build(sim, &local);
    if (!text) return sf_error_set(err, local.code, "%s: %s", path, local.msg);
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

static void task_name(const sf_sim *sim, const sim_task *t, char *buf, size_t n) {
    const sf_op *op = sf_graph_op(sim->g, t->op);
    const char *name = op ? op->name : "?";
    switch ((sim_kind)t->kind) {
    case SIM_FWD: snprintf(buf, n, "%s fwd p%d", name, t->part); break;
    case SIM_BWD: snprintf(buf, n, "%s bwd p%d", name, t->part); break;
    case SIM_UPDATE: snprintf(buf, n, "update %s", name); break;
    case SIM_XFER: snprintf(buf, n, "xfer %s p%d", name, t->part); break;
    case SIM_GRAD: snprintf(buf, n, "grad %s p%d", name, t->part); break;
    case SIM_SYNC: snprintf(buf, n, "allreduce %s", name); break;
    case SIM_COPY: snprintf(buf, n, "copy %s p%d", name, t->part); break;
    case SIM_RECOMPUTE: snprintf(buf, n, "%s recompute p%d", name, t->part); break;
    default: snprintf(buf, n, "barrier %s", name); break;
    }
}

static const char *const kind_cat[SIM_KIND_COUNT] = {
    "forward", "backward", "update", "transfer", "gradient", "allreduce", "copy", "recompute",
    "barrier"};
_Static_assert(sizeof kind_cat / sizeof kind_cat[0] == SIM_KIND_COUNT, "a category per kind");

/* Which resources hold tasks: used[r] for r in 0..n_res-1 (caller frees). */
static unsigned char *used_resources(const sf_sim *sim) {
    const sim_layout *L = &sim->lay;
    unsigned char *used = calloc((size_t)sim->n_res + 1, 1);
    if (!used) return NULL;
    for (int k = 0; k < sim->n_order; k++) {
        for (int64_t i = L->span[k].base; i < L->span[k].base + L->span[k].n; i++) {
            int32_t r = L->res[i];
            if (r >= 0 && r < sim->n_res) used[r] = 1;
        }
    }
    return used;
}

/* Memory over the schedule, device by device: the timeline's events
 * (sim_mem_events) regrouped by device, each device's in time order, device
 * d's at ev[start[d] .. start[d + 1]). */
typedef struct mem_curves {
    sim_mem_event *ev;
    int64_t *start; /* [n_dev + 1] */
} mem_curves;

static void mem_curves_free(mem_curves *mc) {
    free(mc->ev);
    free(mc->start);
}

static int mem_curves_get(const sf_sim *sim, mem_curves *mc) {
    memset(mc, 0, sizeof *mc);
    sim_mem_event *all;
    int64_t n = sim_mem_events(sim, sim->cur, &all);
    if (n < 0) return -1;
    mc->ev = malloc((size_t)(n + 1) * sizeof *mc->ev);
    mc->start = calloc((size_t)sim->n_dev + 2, sizeof *mc->start);
    if (!mc->ev || !mc->start) {
        free(all);
        mem_curves_free(mc);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) mc->start[all[i].dev + 1]++;
    for (int d = 0; d < sim->n_dev; d++) mc->start[d + 1] += mc->start[d];
    /* start[d] serves as device d's cursor, which ends where d + 1 begins:
     * shifted back after */
    for (int64_t i = 0; i < n; i++) mc->ev[mc->start[all[i].dev]++] = all[i];
    for (int d = sim->n_dev; d > 0; d--) mc->start[d] = mc->start[d - 1];
    mc->start[0] = 0;
    free(all);
    return 0;
}

static void device_label(const sf_sim *sim, int d, char *buf, size_t n) {
    const sf_device *dev = sf_machine_device(sim->m, d);
    snprintf(buf, n, "device %d (node %d)", d, dev ? dev->node : 0);
}

/* ---- Chrome trace --------------------------------------------------------------- */

enum { PID_DEVICES = 1, PID_LINKS = 2, PID_MEMORY = 3 };

static void trace_meta(sf_strbuf *b, int *first, const char *what, int pid, int tid,
                       const char *name) {
    sf_strbuf_printf(b, "%s\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d", *first ? "" : ",", what,
                     pid);
    if (tid >= 0) sf_strbuf_printf(b, ",\"tid\":%d", tid);
    sf_strbuf_puts(b, ",\"args\":{\"name\":\"");
    put_json_text(b, name);
    sf_strbuf_puts(b, "\"}}");
    *first = 0;
}

static void trace_sort(sf_strbuf *b, const char *what, int pid, int tid, int index) {
    sf_strbuf_printf(b, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d", what, pid);
    if (tid >= 0) sf_strbuf_printf(b, ",\"tid\":%d", tid);
    sf_strbuf_printf(b, ",\"args\":{\"sort_index\":%d}}", index);
}

/* Memory per device as counter tracks of a "memory" process: the bytes alive
 * after the events at each instant, in MiB. */
static void trace_memory(sf_strbuf *b, const sf_sim *sim, const mem_curves *mc) {
    int first = 0;
    trace_meta(b, &first, "process_name", PID_MEMORY, -1, "memory");
    trace_sort(b, "process_sort_index", PID_MEMORY, -1, 2);
    for (int d = 0; d < sim->n_dev && !b->oom; d++) {
        double cur = 0;
        for (int64_t i = mc->start[d]; i < mc->start[d + 1]; i++) {
            cur += mc->ev[i].bytes;
            if (i + 1 < mc->start[d + 1] && mc->ev[i + 1].t == mc->ev[i].t) continue;
            sf_strbuf_printf(b,
                             ",\n{\"ph\":\"C\",\"name\":\"device %d\",\"pid\":%d,\"ts\":%.4f,"
                             "\"args\":{\"MiB\":%.6f}}",
                             d, PID_MEMORY, mc->ev[i].t * 1e6, cur / 1048576.0);
        }
    }
}

char *sf_sim_trace_to_json(const sf_sim *sim, sf_error *err) {
    if (check_schedule(sim, err) != SF_OK) return NULL;
    sim = sim_shown(sim); /* a pipeline's tasks are its inner simulator's */
    const sim_layout *L = &sim->lay;
    const sim_sched *f = sim->cur;
    unsigned char *used = used_resources(sim);
    int32_t *links = sim_link_res_sorted(sim);
    if (!used || !links) {
        free(used);
        free(links);
        sf_error_set(err, SF_ERR_NOMEM, "out of memory building the trace");
        return NULL;
    }
    sf_strbuf b = {0};
    sf_strbuf_puts(&b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"");
    put_json_text(&b, sf_graph_name(sim->g));
    sf_strbuf_puts(&b, "\",\"machine\":\"");
    put_json_text(&b, sf_machine_name(sim->m));
    sf_strbuf_printf(&b, "\",\"iter_ms\":%.6f,\"tasks\":%lld},\n\"traceEvents\":[",
                     f->result.iter_s * 1e3, (long long)L->n_tasks);

    int first = 1;
    char name[160];
    trace_meta(&b, &first, "process_name", PID_DEVICES, -1, "devices");
    trace_sort(&b, "process_sort_index", PID_DEVICES, -1, 0);
    trace_meta(&b, &first, "process_name", PID_LINKS, -1, "links");
    trace_sort(&b, "process_sort_index", PID_LINKS, -1, 1);
    for (int d = 0; d < sim->n_dev; d++) {
        device_label(sim, d, name, sizeof name);
        trace_meta(&b, &first, "thread_name", PID_DEVICES, d, name);
        trace_sort(&b, "thread_sort_index", PID_DEVICES, d, d);
    }
    /* a link's thread is its machine link id; the links in id order */
    for (int k = 0; k < sim->n_links; k++) {
        if (!used[links[k]]) continue;
        int l = sim_res_link(sim, links[k]);
        sf_link lk;
        char ln[SF_LINK_NAME_MAX];
        sf_machine_link(sim->m, l, &lk);
        sf_machine_link_name(sim->m, l, ln, sizeof ln);
        snprintf(name, sizeof name, "%s (%s)", ln, sf_link_type_name(lk.type));
        trace_meta(&b, &first, "thread_name", PID_LINKS, l, name);
        trace_sort(&b, "thread_sort_index", PID_LINKS, l, l);
    }

    for (int k = 0; k < sim->n_order && !b.oom; k++) {
        for (int64_t i = L->span[k].base; i < L->span[k].base + L->span[k].n && !b.oom; i++) {
            int32_t r = L->res[i];
            if (r < 0 || r >= sim->n_res) continue;
            const sim_task *t = sim_task_of(sim, i, NULL);
            const sf_op *op = sf_graph_op(sim->g, t->op);
            int on_link = r >= sim->n_dev;
            task_name(sim, t, name, sizeof name);
            sf_strbuf_puts(&b, ",\n{\"ph\":\"X\",\"name\":\"");
            put_json_text(&b, name);
            sf_strbuf_printf(&b,
                             "\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.4f,\"dur\":%.4f,"
                             "\"args\":{\"op\":\"",
                             t->kind < SIM_KIND_COUNT ? kind_cat[t->kind] : "?",
                             on_link ? PID_LINKS : PID_DEVICES, on_link ? sim_res_link(sim, r) : r,
                             f->start[i] * 1e6, (f->finish[i] - f->start[i]) * 1e6);
            put_json_text(&b, op ? op->name : "?");
            if (on_link)
                sf_strbuf_printf(&b, "\",\"%s\":%d,\"bytes\":%lld}}",
                                 t->kind == SIM_SYNC ? "shard" : "part", t->part,
                                 (long long)t->bytes);
            else
                sf_strbuf_printf(&b, "\",\"%s\":%d}}", t->kind == SIM_UPDATE ? "shard" : "part",
                                 t->part);
        }
    }
    if (sim->opt.memory_timeline && !b.oom) {
        mem_curves mc;
        if (mem_curves_get(sim, &mc)) {
            free(used);
            free(links);
            sf_strbuf_free(&b);
            sf_error_set(err, SF_ERR_NOMEM, "out of memory building the trace");
            return NULL;
        }
        trace_memory(&b, sim, &mc);
        mem_curves_free(&mc);
    }
    sf_strbuf_puts(&b, "\n]}\n");
    free(used);
    free(links);
    return take_text(&b, "trace", err);
}

sf_status sf_sim_write_trace(const sf_sim *sim, const char *path, sf_error *err) {
    return write_text(path, sf_sim_trace_to_json, sim, err);
}

/* ---- SVG Gantt chart -------------------------------------------------------------- */

#define SVG_WIDTH 1600.0
#define SVG_LEFT 190.0 /* room for row labels */
#define SVG_RIGHT 20.0
#define SVG_TOP 56.0     /* title and time axis */
#define SVG_ROW 18.0     /* row pitch */
#define SVG_BAR 14.0     /* bar height within a row */
#define SVG_MERGE_PX 1.0 /* tasks narrower than this merge with their neighbours */
#define SVG_MEM_GAP 40.0 /* between the task rows and the memory panel */
#define SVG_MEM_ROW 30.0 /* a device's memory row */

/* SVG colour classes by kind; barriers are never drawn. */
static const char *const kind_class[SIM_KIND_COUNT] = {"f", "b", "u", "x", "g",
                                                       "s", "c", "r", "z"};
static const char *const kind_label[SIM_KIND_COUNT] = {
    "forward",    "backward", "update",    "transfer", "gradient transfer",
    "all-reduce", "copy",     "recompute", "barrier"};
static const char *const kind_colour[SIM_KIND_COUNT] = {"#4e79a7", "#f28e2b", "#59a14f",
                                                        "#76b7b2", "#edc948", "#e15759",
                                                        "#b07aa1", "#9467bd", "#bab0ac"};
_Static_assert(sizeof kind_class / sizeof kind_class[0] == SIM_KIND_COUNT, "a class per kind");
_Static_assert(sizeof kind_colour / sizeof kind_colour[0] == SIM_KIND_COUNT, "a colour per kind");

typedef struct svg_item {
    double start, finish;
    int64_t slot;
    uint64_t key; /* canonical: ties are broken alike however the layout was made */
    int32_t row;
} svg_item;

static int item_cmp(const void *pa, const void *pb) {
    const svg_item *a = pa, *b = pb;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* A tick step of 1, 2 or 5 times a power of ten giving at most ~10 ticks. */
static double tick_step(double span) {
    if (!(span > 0)) return 1;
    double raw = span / 10.0, p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* One rectangle: a single task (n == 1) or a run of n sub-pixel tasks. */
static void svg_rect(sf_strbuf *b, const sf_sim *sim, double scale, const svg_item *first,
                     int64_t n, double start, double finish, int kind) {
    double x = SVG_LEFT + start * scale, w = (finish - start) * scale;
    if (w < 0.5) w = 0.5; /* keep every task visible */
    sf_strbuf_printf(b, "<rect x=\"%.2f\" width=\"%.2f\" height=\"%.0f\" class=\"%s\"><title>", x,
                     w, SVG_BAR, kind_class[kind]);
    if (n == 1) {
        char name[160];
        task_name(sim, sim_task_of(sim, first->slot, NULL), name, sizeof name);
        sf_strbuf_put_xml(b, name);
    } else {
        sf_strbuf_printf(b, "%lld %s tasks", (long long)n, kind_label[kind]);
    }
    sf_strbuf_printf(b, ": %.4f-%.4f ms</title></rect>\n", start * 1e3, finish * 1e3);
}

/* The memory panel: per device, the bytes alive over the iteration as a filled
 * step curve, each pixel column at its largest value (so no peak is lost
 * however many events fall in it), all rows on one scale: the largest peak. */
static void svg_memory(sf_strbuf *b, const sf_sim *sim, const mem_curves *mc, double scale,
                       double makespan, double top) {
    const sim_sched *f = sim->cur;
    double top_bytes = f->result.live_peak_bytes;
    char v1[48], v2[48];
    sf_strbuf_printf(b,
                     "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">memory alive per device "
                     "(rows on one scale: %s at the top)</text>\n",
                     top - 12, sf_fmt_bytes(top_bytes, v1, sizeof v1));
    int cols = (int)ceil(makespan * scale) + 1;
    double *colmax = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *colmax);
    if (!colmax) {
        b->oom = 1;
        return;
    }
    double usable_frac = 1.0 - sim->opt.memory_headroom;
    for (int d = 0; d < sim->n_dev && !b->oom; d++) {
        double y0 = top + d * SVG_MEM_ROW, h = SVG_MEM_ROW - 4, base = y0 + h;
        char label[160];
        device_label(sim, d, label, sizeof label);
        if (d % 2 == 0)
            sf_strbuf_printf(
                b, "<rect class=\"band\" x=\"0\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\"/>\n", y0,
                SVG_WIDTH, SVG_MEM_ROW);
        double cap = sf_machine_device_kind(sim->m, d)->mem_bytes * usable_frac;
        sf_strbuf_printf(b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", SVG_LEFT - 8,
                         y0 + SVG_MEM_ROW - 10);
        sf_strbuf_put_xml(b, label);
        sf_strbuf_printf(b, ": %s</text>\n", sf_fmt_bytes(f->device_live[d], v1, sizeof v1));
        for (int c = 0; c < cols; c++) colmax[c] = 0;
        double cur = 0;
        for (int64_t i = mc->start[d]; i < mc->start[d + 1]; i++) {
            cur += mc->ev[i].bytes;
            double t0 = mc->ev[i].t, t1 = i + 1 < mc->start[d + 1] ? mc->ev[i + 1].t : makespan;
            int c0 = (int)floor(t0 * scale), c1 = (int)floor(t1 * scale);
            if (c0 < 0) c0 = 0;
            if (c1 >= cols) c1 = cols - 1;
            for (int c = c0; c <= c1; c++)
                if (cur > colmax[c]) colmax[c] = cur;
        }
        double k = top_bytes > 0 ? h / top_bytes : 0;
        sf_strbuf_printf(b, "<path class=\"m\" d=\"M%.1f %.1f", SVG_LEFT, base);
        double last = -1;
        for (int c = 0; c < cols; c++) {
            if (colmax[c] == last) continue;
            double y = base - colmax[c] * k;
            sf_strbuf_printf(b, "L%.1f %.2fL%.1f %.2f", SVG_LEFT + c,
                             base - (last < 0 ? 0 : last) * k, SVG_LEFT + c, y);
            last = colmax[c];
        }
        sf_strbuf_printf(b, "L%.1f %.2fL%.1f %.1fZ\"><title>", SVG_LEFT + cols, base - last * k,
                         SVG_LEFT + cols, base);
        sf_strbuf_put_xml(b, label);
        sf_strbuf_printf(b, ": peak %s at %.4f ms of %s usable</title></path>\n",
                         sf_fmt_bytes(f->device_live[d], v1, sizeof v1), f->live_t[d] * 1e3,
                         sf_fmt_bytes(cap, v2, sizeof v2));
    }
    free(colmax);
}

char *sf_sim_to_svg(const sf_sim *sim, sf_error *err) {
    if (check_schedule(sim, err) != SF_OK) return NULL;
    sim = sim_shown(sim); /* a pipeline's tasks are its inner simulator's */
    const sim_layout *L = &sim->lay;
    const sim_sched *f = sim->cur;
    unsigned char *used = used_resources(sim);
    int32_t *links = sim_link_res_sorted(sim);
    int32_t *row_of = malloc(((size_t)sim->n_res + 1) * sizeof *row_of);
    int32_t *row_res = malloc(((size_t)sim->n_res + 1) * sizeof *row_res);
    svg_item *items = malloc(((size_t)L->n_tasks + 1) * sizeof *items);
    /* memory: a panel of a row per device under the tasks */
    mem_curves mc = {0};
    int mem = sim->opt.memory_timeline;
    int mem_failed = mem && mem_curves_get(sim, &mc);
    if (!used || !links || !row_of || !row_res || !items || mem_failed) {
        free(used);
        free(links);
        free(row_of);
        free(row_res);
        free(items);
        mem_curves_free(&mc);
        sf_error_set(err, SF_ERR_NOMEM, "out of memory building the svg");
        return NULL;
    }
    /* rows: every device, then the links that carried something, by machine link id */
    int n_rows = 0;
    for (int r = 0; r < sim->n_dev; r++) row_res[row_of[r] = n_rows++] = r;
    for (int k = 0; k < sim->n_links; k++) {
        int r = links[k];
        row_of[r] = used[r] ? n_rows : -1;
        if (used[r]) row_res[n_rows++] = r;
    }
    int64_t n = 0;
    double makespan = 0;
    for (int k = 0; k < sim->n_order; k++) {
        for (int64_t i = L->span[k].base; i < L->span[k].base + L->span[k].n; i++) {
            int32_t r = L->res[i];
            if (r < 0 || r >= sim->n_res) continue;
            items[n++] = (svg_item){f->start[i], f->finish[i], i, L->key[i], row_of[r]};
            if (f->finish[i] > makespan) makespan = f->finish[i];
        }
    }
    qsort(items, (size_t)n, sizeof *items, item_cmp);

    double plot_w = SVG_WIDTH - SVG_LEFT - SVG_RIGHT;
    double scale = makespan > 0 ? plot_w / makespan : 0; /* px per second */
    double rows_h = n_rows * SVG_ROW;
    double mem_top = SVG_TOP + rows_h + SVG_MEM_GAP;
    double legend_y = (mem ? mem_top + sim->n_dev * SVG_MEM_ROW : SVG_TOP + rows_h) + 24;
    double height = legend_y + 30;
    char label[160];

    sf_strbuf b = {0};
    sf_strbuf_printf(&b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
                     SVG_WIDTH, height, SVG_WIDTH, height);
    sf_strbuf_puts(&b, "<style>\n");
    for (int k = 0; k < SIM_KIND_COUNT; k++)
        sf_strbuf_printf(&b, ".%s{fill:%s}\n", kind_class[k], kind_colour[k]);
    sf_strbuf_puts(&b, ".grid{stroke:#ddd;stroke-width:1}\n.band{fill:#f4f4f4}\n"
                       ".m{fill:#9c755f;fill-opacity:0.6;stroke:#6b4f3f;stroke-width:0.5}\n"
                       "rect:hover{stroke:#000;stroke-width:1}\n</style>\n");
    sf_strbuf_printf(&b, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", SVG_WIDTH,
                     height);

    /* title */
    sf_strbuf_puts(&b, "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">");
    sf_strbuf_put_xml(&b, sf_graph_name(sim->g));
    sf_strbuf_puts(&b, " on ");
    sf_strbuf_put_xml(&b, sf_machine_name(sim->m));
    sf_strbuf_printf(&b, ": one iteration %.3f ms, %lld tasks</text>\n", makespan * 1e3,
                     (long long)L->n_tasks);

    /* row bands and labels */
    for (int row = 0; row < n_rows; row++) {
        int r = row_res[row];
        double y = SVG_TOP + row * SVG_ROW;
        if (row % 2 == 0)
            sf_strbuf_printf(
                &b, "<rect class=\"band\" x=\"0\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\"/>\n", y,
                SVG_WIDTH, SVG_ROW);
        if (r < sim->n_dev) {
            device_label(sim, r, label, sizeof label);
        } else {
            sf_machine_link_name(sim->m, sim_res_link(sim, r), label, sizeof label);
        }
        sf_strbuf_printf(&b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", SVG_LEFT - 8,
                         y + SVG_ROW - 5);
        sf_strbuf_put_xml(&b, label);
        sf_strbuf_puts(&b, "</text>\n");
    }

    /* time axis: ticks and grid lines in ms */
    double step = tick_step(makespan * 1e3);
    int n_ticks = makespan > 0 ? (int)floor(makespan * 1e3 / step + 1e-9) : 0;
    for (int i = 0; i <= n_ticks && i <= 1000; i++) {
        double t_ms = i * step, x = SVG_LEFT + t_ms * 1e-3 * scale;
        sf_strbuf_printf(&b,
                         "<line class=\"grid\" x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.1f\"/>\n",
                         x, SVG_TOP - 6, x, SVG_TOP + rows_h);
        sf_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">%.6g ms</text>\n",
                         x, SVG_TOP - 10, t_ms);
    }

    /* tasks, row by row; runs of sub-pixel tasks of one kind become one rect */
    int cur_row = -1;
    for (int64_t i = 0; i < n && !b.oom;) {
        const svg_item *it = &items[i];
        if (it->row != cur_row) {
            if (cur_row >= 0) sf_strbuf_puts(&b, "</g>\n");
            cur_row = it->row;
            sf_strbuf_printf(&b, "<g transform=\"translate(0,%.1f)\">\n",
                             SVG_TOP + cur_row * SVG_ROW + (SVG_ROW - SVG_BAR) / 2);
        }
        int kind = sim_task_of(sim, it->slot, NULL)->kind;
        double s0 = it->start, f0 = it->finish;
        int64_t j = i + 1;
        if ((f0 - s0) * scale < SVG_MERGE_PX) {
            while (j < n && items[j].row == cur_row &&
                   sim_task_of(sim, items[j].slot, NULL)->kind == kind &&
                   (items[j].finish - items[j].start) * scale < SVG_MERGE_PX &&
                   (items[j].start - f0) * scale < SVG_MERGE_PX &&
                   (items[j].finish - s0) * scale < 4 * SVG_MERGE_PX) {
                if (items[j].finish > f0) f0 = items[j].finish;
                j++;
            }
        }
        svg_rect(&b, sim, scale, it, j - i, s0, f0, kind);
        i = j;
    }
    if (cur_row >= 0) sf_strbuf_puts(&b, "</g>\n");

    if (mem) svg_memory(&b, sim, &mc, scale, makespan, mem_top);
    mem_curves_free(&mc);

    /* legend */
    double x = SVG_LEFT;
    for (int k = 0; k < SIM_KIND_COUNT; k++) {
        if (k == SIM_BARRIER) continue;
        sf_strbuf_printf(&b,
                         "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" class=\"%s\"/>"
                         "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                         x, legend_y, kind_class[k], x + 16, legend_y + 10, kind_label[k]);
        x += 40 + 7.0 * (double)strlen(kind_label[k]);
    }
    sf_strbuf_puts(&b, "</svg>\n");
    free(used);
    free(links);
    free(row_of);
    free(row_res);
    free(items);
    return take_text(&b, "svg", err);
}

sf_status sf_sim_write_svg(const sf_sim *sim, const char *path, sf_error *err) {
    return write_text(path, sf_sim_to_svg, sim, err);
}
