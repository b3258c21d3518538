/*
 * status.c - status codes and the caller-held error message.
 *
 * SQLite keeps the message in its connection; soapflow has no global context,
 * so the caller passes an sf_error where it wants one. The first error wins so
 * that the innermost, most specific message survives as it unwinds; callers
 * that know more (the file name) add it with sf_error_prefix.
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

sf_status sf_error_vset(sf_error *err, sf_status code, const char *fmt, va_list ap) {
    if (!err || err->code != SF_OK) return code;
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
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
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(pre);
    if (n >= sizeof err->msg) n = sizeof err->msg - 1;
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
