/*
 * log.c - levelled logging through an application-installed sink.
 *
 * The library must not print on its own, so the default sink drops messages;
 * the CLI installs sf_log_stderr_sink. The sink and level are process-wide
 * settings (like a locale), not algorithm state, so a global is acceptable.
 */
#include "soapflow/core.h"

#include <stdio.h>
#include <time.h>

static sf_log_sink g_sink;
static void *g_sink_user;
static sf_log_level g_level = SF_LOG_WARN;

void sf_log_set_sink(sf_log_sink sink, void *user) {
    g_sink = sink;
    g_sink_user = user;
}

void sf_log_set_level(sf_log_level level) { g_level = level; }
sf_log_level sf_log_get_level(void) { return g_level; }

void sf_log(sf_log_level level, const char *fmt, ...) {
    if (!g_sink || level > g_level) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_sink(level, buf, g_sink_user);
}

void sf_fputs_line(const char *s, FILE *f) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t')
            fputc(' ', f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

void sf_log_stderr_sink(sf_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "soapflow: %s: ", names[level]);
    sf_fputs_line(msg, stderr);
    fputc('\n', stderr);
}

double sf_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
