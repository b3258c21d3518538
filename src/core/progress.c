/*
 * progress.c - a one-line progress bar for long work.
 *
 * It draws only when the stream is a terminal (so logs and CI output stay
 * clean), redraws at most ten times a second (so a hot loop may call update
 * on every step), and erases itself when done.
 */
#include "soapflow/core.h"

#include <string.h>
#include <unistd.h>

void sf_progress_start(sf_progress *p, FILE *out, const char *label, double total) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->enabled = out && isatty(fileno(out));
    p->total = total > 0 ? total : 1;
    p->start_s = sf_now_s();
    p->last_draw_s = -1;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
}

void sf_progress_update(sf_progress *p, double done, const char *extra) {
    if (!p->enabled) return;
    double now = sf_now_s();
    if (p->last_draw_s >= 0 && now - p->last_draw_s < 0.1) return;
    p->last_draw_s = now;
    double frac = done / p->total;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = (int)(frac * WIDTH);
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    double elapsed = now - p->start_s;
    double left = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    fprintf(p->out, "\r\033[K%s [%s] %3.0f%% %.0fs left%s%s", p->label, bar, frac * 100, left,
            extra ? "  " : "", extra ? extra : "");
    fflush(p->out);
}

void sf_progress_finish(sf_progress *p) {
    if (!p->enabled) return;
    fprintf(p->out, "\r\033[K");
    fflush(p->out);
}
