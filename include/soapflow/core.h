/*
 * soapflow/core.h - the foundation every other module stands on.
 *
 * Quick tour:
 *
 *     sf_error err = {0};
 *     sf_arena *a = sf_arena_new(0);             // 0: default block size
 *     int64_t *v = sf_arena_alloc(a, 16 * sizeof *v);
 *     if (!v) return sf_error_set(&err, SF_ERR_NOMEM, "out of memory");
 *     sf_rng rng; sf_rng_seed(&rng, 42);         // no global RNG: pass it by pointer
 *     double u = sf_rng_uniform(&rng);
 *     sf_arena_free(a);                           // everything at once
 *
 * Errors are values: functions return an `sf_status` (0 ok, negative failure)
 * and, where a human needs to know more, fill an `sf_error` with a one-line
 * message that names the file, line and column or the operator concerned.
 * Library code never prints on its own and never exits; the CLI decides.
 */
#ifndef SOAPFLOW_CORE_H
#define SOAPFLOW_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "soapflow/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SF_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SF_PRINTF(fmt, args)
#endif

/* ---- status codes ------------------------------------------------------ */

typedef enum sf_status {
    SF_OK = 0,
    SF_ERR_NOMEM = -1,    /* an allocation failed */
    SF_ERR_INVALID = -2,  /* an argument or a value is not acceptable */
    SF_ERR_IO = -3,       /* a file could not be opened, read or written */
    SF_ERR_PARSE = -4,    /* malformed JSON, ONNX or other input text */
    SF_ERR_SHAPE = -5,    /* tensor shapes do not fit an operator */
    SF_ERR_NOTFOUND = -6, /* unknown operator, preset, model or name */
    SF_ERR_RANGE = -7,    /* a number out of range, or an overflow */
    SF_ERR_UNSUPPORTED = -8,
    SF_ERR_INTERNAL = -9, /* an invariant broke: a bug in soapflow */
    SF_STATUS_MIN = -9
} sf_status;

/* A short English phrase for a status ("out of memory"). Never NULL. */
SF_API const char *sf_status_str(sf_status s);

#define SF_ERRMSG_MAX 512

/* An error held by the caller: a status and a one-line human message.
 * Control characters that a message quotes from its input (a name, a path)
 * are written as C escapes ("\n", "\x1b"), so that it stays one line. */
typedef struct sf_error {
    sf_status code;
    char msg[SF_ERRMSG_MAX];
} sf_error;

/* Record an error (when err is non-NULL) and return `code`, so that
 * `return sf_error_set(err, SF_ERR_SHAPE, "...")` reads naturally.
 * The first error wins: a later call does not overwrite a set message. */
SF_API sf_status sf_error_set(sf_error *err, sf_status code, const char *fmt, ...) SF_PRINTF(3, 4);
SF_API sf_status sf_error_vset(sf_error *err, sf_status code, const char *fmt, va_list ap);
/* Prefix an existing message ("model.json: " + msg). */
SF_API void sf_error_prefix(sf_error *err, const char *fmt, ...) SF_PRINTF(2, 3);
SF_API void sf_error_clear(sf_error *err);

/* ---- checked arithmetic ------------------------------------------------ */

/* Multiply/add with overflow detection: return 0 and store the result, or
 * return -1 when the result would not fit. */
SF_API int sf_mul_overflow_i64(int64_t a, int64_t b, int64_t *out);
SF_API int sf_mul_overflow_size(size_t a, size_t b, size_t *out);

/* ---- arena ------------------------------------------------------------- */

/* A bump allocator for graph-shaped data that dies all at once.
 * Blocks are chained; an allocation larger than a block gets its own block.
 * Every allocation is aligned to 16 bytes and zero-filled. */
typedef struct sf_arena sf_arena;

SF_API sf_arena *sf_arena_new(size_t block_bytes);
SF_API void *sf_arena_alloc(sf_arena *a, size_t bytes);
/* count * size, overflow checked; NULL on overflow or out of memory. */
SF_API void *sf_arena_calloc(sf_arena *a, size_t count, size_t size);
SF_API char *sf_arena_strdup(sf_arena *a, const char *s);
SF_API size_t sf_arena_used(const sf_arena *a); /* bytes handed out */
SF_API void sf_arena_free(sf_arena *a);

/* ---- growable string -------------------------------------------------- */

/* Text built piece by piece (JSON, DOT, traces). Start from `sf_strbuf b = {0};`,
 * append, then sf_strbuf_take the result or sf_strbuf_free it. An append that
 * cannot allocate sets `oom` and every later append is ignored, so a builder
 * checks once at the end (take returns NULL) rather than after each piece. */
typedef struct sf_strbuf {
    char *s;    /* NUL-terminated text; NULL until the first append */
    size_t len; /* bytes of text, without the NUL */
    size_t cap; /* bytes allocated at s */
    int oom;    /* sticky: an append failed and the text is incomplete */
} sf_strbuf;

SF_API void sf_strbuf_add(sf_strbuf *b, const char *s, size_t n); /* n bytes of s, NULs and all */
SF_API void sf_strbuf_puts(sf_strbuf *b, const char *s);
/* Formatted text of any length, written in place. */
SF_API void sf_strbuf_printf(sf_strbuf *b, const char *fmt, ...) SF_PRINTF(2, 3);
SF_API void sf_strbuf_vprintf(sf_strbuf *b, const char *fmt, va_list ap);
/* The text as a malloc'd string the caller frees ("" when nothing was appended),
 * or NULL when an append ran out of memory; either way b is empty again. */
SF_API char *sf_strbuf_take(sf_strbuf *b);
/* Drop the text; b is empty again and may be reused. */
SF_API void sf_strbuf_free(sf_strbuf *b);
/* s escaped for the two picture formats, so that a name that holds any bytes (a
 * model called `R&D <v2>`) cannot break the file. Every SVG and DOT writer puts
 * text through these and nothing else.
 * XML character data or attribute text: & < > " ' as entities, control
 * characters (which XML 1.0 forbids) as spaces, and bytes that are not valid
 * UTF-8 as U+FFFD, so the result is well-formed whatever s holds.
 * The inside of a DOT quoted string: quotes and backslashes escaped (a
 * backslash would otherwise start a label escape such as \l), a line break as
 * \n, carriage returns dropped. */
SF_API void sf_strbuf_put_xml(sf_strbuf *b, const char *s);
SF_API void sf_strbuf_put_dot(sf_strbuf *b, const char *s);
/* bytes as "512 B", "1.50 MiB", "74.5 GiB" (binary units, 3 significant digits or
 * so) into buf; returns buf. */
SF_API char *sf_fmt_bytes(double bytes, char *buf, size_t n);

/* ---- random numbers ---------------------------------------------------- */

/* xoshiro256** seeded by splitmix64: small, fast, and the same sequence on
 * every platform for the same seed. */
typedef struct sf_rng {
    uint64_t s[4];
} sf_rng;

SF_API void sf_rng_seed(sf_rng *r, uint64_t seed);
SF_API uint64_t sf_rng_next(sf_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
SF_API double sf_rng_uniform(sf_rng *r);
/* Uniform integer in [0, n), without modulo bias; n > 0. */
SF_API uint64_t sf_rng_below(sf_rng *r, uint64_t n);

/* ---- logging ----------------------------------------------------------- */

typedef enum sf_log_level {
    SF_LOG_ERROR = 0,
    SF_LOG_WARN = 1,
    SF_LOG_INFO = 2,
    SF_LOG_DEBUG = 3
} sf_log_level;

/* Logging goes to a sink that the application installs; the default sink
 * is silent so that the library never prints on its own. The CLI installs
 * sf_log_stderr_sink. */
typedef void (*sf_log_sink)(sf_log_level level, const char *msg, void *user);

SF_API void sf_log_set_sink(sf_log_sink sink, void *user);
SF_API void sf_log_set_level(sf_log_level level);
SF_API sf_log_level sf_log_get_level(void);
SF_API void sf_log(sf_log_level level, const char *fmt, ...) SF_PRINTF(2, 3);
/* Writes "soapflow: warning: msg" to stderr, on one line (sf_fputs_line). */
SF_API void sf_log_stderr_sink(sf_log_level level, const char *msg, void *user);
/* Write s to f as part of one line of text: newline, return and tab become a
 * space, other control characters \xNN. Messages quote names and text from
 * input files, which must neither split a message in two nor send escape
 * sequences to a terminal. */
SF_API void sf_fputs_line(const char *s, FILE *f);

#define SF_LOG_WARN_F(...) sf_log(SF_LOG_WARN, __VA_ARGS__)
#define SF_LOG_INFO_F(...) sf_log(SF_LOG_INFO, __VA_ARGS__)
#define SF_LOG_DEBUG_F(...) sf_log(SF_LOG_DEBUG, __VA_ARGS__)

/* ---- progress bar ------------------------------------------------------ */

/* A progress bar for long work. It draws on `out` (normally stderr) only
 * when that stream is a terminal, at most ~10 times a second, and erases
 * itself when finished. When not a terminal it draws nothing at all. */
typedef struct sf_progress {
    FILE *out;
    int enabled;    /* 1 when out is a terminal */
    double total;   /* units of work, e.g. iterations or seconds */
    double start_s; /* monotonic clock at start */
    double last_draw_s;
    char label[64];
} sf_progress;

SF_API void sf_progress_start(sf_progress *p, FILE *out, const char *label, double total);
/* done: units finished so far; extra: a short status text or NULL. */
SF_API void sf_progress_update(sf_progress *p, double done, const char *extra);
SF_API void sf_progress_finish(sf_progress *p);

/* Monotonic seconds, for timing. */
SF_API double sf_now_s(void);

#ifdef __cplusplus
}
#endif
#endif
