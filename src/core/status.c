/*
 * status.c - status codes and the caller-held error message.
 *
 * SQLite keeps the message in its connection; soapflow has no global context,
 * so the caller passes an sf_error where it wants one. The first error wins so
 * that the innermost, most specific message survives as it unwinds; callers
 * that know more (the file name) add it with sf_error_prefix.
 *
 * A message often quotes its input (an operator's name, a JSON text near a
 * syntax error, a path), and input may hold control characters: a newline
 * breaks the promise of one line, an escape sequence would drive the terminal
 * the CLI prints on. Both functions that write a message therefore write those
 * bytes as C escapes (\n, \t, \x1b): one place, every message.
 */
#include "soapflow/core.h"

#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
    "ok",           "out of memory",    "invalid argument", "input/output error",
    "parse error",  "shape mismatch",   "not found",        "out of range",
    "unsupported",  "internal error",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == (size_t)(1 - SF_STATUS_MIN),
               "one name per status");

const char *sf_status_str(sf_status s) {
    if (s > 0 || s < SF_STATUS_MIN) return "unknown status";
    return status_names[-(int)s];
}

/* text into dst (cap bytes, NUL-terminated, cut short where it does not fit)
 * with control characters as C escapes. */
static void put_escaped(char *dst, size_t cap, const char *text) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[5];
        size_t k;
        if (*p >= 0x20 && *p != 0x7f) {
            esc[0] = (char)*p;
            k = 1;
        } else if (*p == '\n' || *p == '\t' || *p == '\r') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
            k = 2;
        } else {
            snprintf(esc, sizeof esc, "\\x%02x", *p);
            k = 4;
        }
        if (n + k >= cap) break;
        memcpy(dst + n, esc, k);
        n += k;
    }
    dst[n] = '\0';
}

sf_status sf_error_vset(sf_error *err, sf_status code, const char *fmt, va_list ap) {
    if (!err || err->code != SF_OK) return code;
    err->code = code;
    char raw[SF_ERRMSG_MAX];
    vsnprintf(raw, sizeof raw, fmt, ap);
    put_escaped(err->msg, sizeof err->msg, raw);
    return code;
}

sf_status sf_error_set(sf_error *err, sf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void sf_error_prefix(sf_error *err, const char *fmt, ...) {
    if (!err) return;
    char pre[SF_ERRMSG_MAX], old[SF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(old, sizeof old, fmt, ap);
    va_end(ap);
    put_escaped(pre, sizeof pre, old);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(pre);
    memcpy(err->msg, pre, n);
    size_t m = strlen(old);
    if (m > sizeof err->msg - 1 - n) m = sizeof err->msg - 1 - n;
    memcpy(err->msg + n, old, m);
    err->msg[n + m] = '\0';
}

void sf_error_clear(sf_error *err) {
    if (!err) return;
    err->code = SF_OK;
    err->msg[0] = '\0';
}

int sf_mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int sf_mul_overflow_size(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
