/*
 * file.c - whole-file reads and atomic writes.
 *
 * Writers never leave half a file: the text goes to a temporary file in the
 * target's directory (so rename is atomic on one file system) and is renamed
 * over the target only when every byte is written and the file is closed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "soapflow/io.h"

sf_status sf_write_file_atomic(const char *path, const char *data, size_t len, sf_error *err) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        sf_status st = sf_error_set(err, SF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    /* mkstemp makes the file 0600; give it the mode a plain fopen would */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "wb");
    int ok = f != NULL;
    if (ok && len > 0) ok = fwrite(data, 1, len, f) == len;
    if (f) {
        if (fclose(f) != 0) ok = 0;
    } else {
        close(fd);
    }
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    free(tmp);
    return SF_OK;
}

char *sf_read_file(const char *path, size_t *len, sf_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f), bad_errno = errno;
    fclose(f);
    if (!buf) {
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (bad) {
        free(buf);
        sf_error_set(err, SF_ERR_IO, "%s: cannot read: %s", path, strerror(bad_errno));
        return NULL;
    }
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        sf_error_set(err, SF_ERR_PARSE, "%s: NUL byte at offset %zu: not a text file", path,
                     (size_t)(nul - buf));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}
