/*
 * onnx_extdata.c - tensor data kept outside the model file (ONNX "external
 * data"), as torch.onnx.export writes it for models over protobuf's 2 GB:
 * data_location EXTERNAL and external_data entries "location" (a file name
 * relative to the model's folder), "offset" and "length" (bytes, decimal; no
 * length: to the end of the file), "checksum" (ignored).
 *
 * The file must lie inside the model's folder: an absolute location, a ".."
 * component, or a path that resolves (through symbolic links) outside the
 * folder is refused, so a model cannot make soapflow read any other file of
 * the machine. Sizes are checked against the tensor's shape before anything is
 * read; the bytes are read only when the value is converted (the lazy path of
 * onnx_ctx.c), one tensor at a time, so memory holds one tensor's bytes beside
 * the floats made of them. Every failure names the tensor and the file.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_ctx.h"

/* A non-negative decimal integer, or -1. */
static int64_t parse_count(const char *s) {
    if (!s || !*s) return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* 1 when loc is a relative path with no ".." component. */
static int stays_inside(const char *loc) {
    if (!loc[0] || loc[0] == '/') return 0;
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += n + (e != NULL);
    }
    return 1;
}

/* The message of a failure into msg. */
static sf_status why(char *msg, size_t cap, sf_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static sf_status why(char *msg, size_t cap, sf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return st;
}

sf_status ox_external_data(const char *dir, const Onnx__TensorProto *t, const char *nm, size_t need,
                           uint8_t **out, char *msg, size_t cap) {
    if (out) *out = NULL;
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        if (!strcmp(k, "location")) {
            loc = v;
        } else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
            int64_t x = parse_count(v);
            if (x < 0)
                return why(msg, cap, SF_ERR_PARSE,
                           "tensor '%.100s': external data %s '%.40s' is not a byte count", nm, k,
                           v);
            if (k[0] == 'o')
                off = x;
            else
                len = x;
        }
    }
    if (!loc)
        return why(msg, cap, SF_ERR_PARSE, "tensor '%.100s': external data without a location", nm);
    if (!dir)
        return why(msg, cap, SF_ERR_UNSUPPORTED,
                   "tensor '%.100s' keeps its data in '%.100s' beside the model: load the "
                   "model from its file (sf_onnx_load), not from memory",
                   nm, loc);
    if (!stays_inside(loc))
        return why(msg, cap, SF_ERR_INVALID,
                   "tensor '%.100s': external data location '%.100s' is not a relative "
                   "path inside the model's folder",
                   nm, loc);
    size_t dl = strlen(dir), ll = strlen(loc);
    char *path = malloc(dl + ll + 2);
    if (!path) return why(msg, cap, SF_ERR_NOMEM, "out of memory");
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, loc, ll + 1);
    sf_status st = SF_OK;
    char *real = realpath(path, NULL), *rdir = realpath(dir, NULL);
    int fd = -1;
    struct stat sb;
    size_t rl = rdir ? strlen(rdir) : 0;
    if (!real || !rdir) {
        st = why(msg, cap, SF_ERR_NOTFOUND, "tensor '%.100s': external data file %.200s: %s", nm,
                 path, strerror(errno));
    } else if (strncmp(real, rdir, rl) != 0 || (real[rl] != '/' && rl > 1)) {
        st = why(msg, cap, SF_ERR_INVALID,
                 "tensor '%.100s': external data file %.200s lies outside the model's folder", nm,
                 path);
    } else if ((fd = open(real, O_RDONLY)) < 0 || fstat(fd, &sb) != 0) {
        st = why(msg, cap, SF_ERR_IO, "tensor '%.100s': external data file %.200s: %s", nm, path,
                 strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = why(msg, cap, SF_ERR_INVALID,
                 "tensor '%.100s': external data file %.200s is not a file", nm, path);
    } else {
        int64_t size = (int64_t)sb.st_size;
        if (len < 0) len = off <= size ? size - off : 0;
        if ((uint64_t)len != (uint64_t)need) {
            st = why(msg, cap, SF_ERR_PARSE,
                     "tensor '%.100s': external data of %lld bytes in %.200s, its shape needs "
                     "%zu",
                     nm, (long long)len, path, need);
        } else if (off > size || len > size - off) {
            st = why(msg, cap, SF_ERR_PARSE,
                     "tensor '%.100s': external data file %.200s is short: %lld bytes, the "
                     "tensor's end is at byte %lld",
                     nm, path, (long long)size, (long long)(off + len));
        } else if (out) {
            uint8_t *buf = malloc(need ? need : 1);
            size_t got = 0;
            if (!buf) st = why(msg, cap, SF_ERR_NOMEM, "out of memory");
            while (st == SF_OK && got < need) {
                ssize_t r = pread(fd, buf + got, need - got, (off_t)(off + (int64_t)got));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    st = why(msg, cap, SF_ERR_IO, "tensor '%.100s': reading %.200s: %s", nm, path,
                             r < 0 ? strerror(errno) : "the file ended early");
                    break;
                }
                got += (size_t)r;
            }
            if (st == SF_OK)
                *out = buf;
            else
                free(buf);
        }
    }
    if (fd >= 0) close(fd);
    free(real);
    free(rdir);
    free(path);
    return st;
}
