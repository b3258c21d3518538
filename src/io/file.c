/*
 * file.c - whole-file reads and atomic writes.
 *
 * Writers never leave half a file: the text goes to a temporary file in the
 * target's directory (so rename is atomic on one file system) and is renamed
 * over the target only when every byte is written and the file is closed.
 * The temporary being written is remembered, so that a program that stops on
 * a signal can remove it (sf_write_file_abort) rather than leave it behind.
 * Blocking the signals while it exists was the other way; it does not work
 * once a library (OpenBLAS) has started threads that do not block them, as
 * the signal then kills the process from one of those.
 *
 * A target that exists but is not a regular file (/dev/null, /dev/full, a
 * FIFO) is written in place: renaming over it would replace a device node
 * with a file, and there is no half file to avoid. Symbolic links are
 * followed, so the file a link names is written (made, when it does not exist
 * yet, as a shell's '>' would) and the link kept.
 *
 * Reads stop at SF_READ_FILE_MAX bytes, so that a path naming an endless
 * stream (/dev/zero) is an error rather than an allocation without end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "soapflow/io.h"

/* The temporary file being written, or NULL: one at a time, as writes are. */
static char *volatile pending_tmp;

void sf_write_file_abort(void) {
    char *tmp = pending_tmp;
    if (tmp) unlink(tmp); /* async-signal-safe */
}

/* Write all of data to fd; 0, or -1 with errno set. */
static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t k = write(fd, data, len);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += k;
        len -= (size_t)k;
    }
    return 0;
}

/* An existing device or FIFO: opened without O_CREAT, so that it can never
 * turn into a regular file here. */
static sf_status write_in_place(const char *path, const char *target, const char *data, size_t len,
                                int probe, sf_error *err) {
    if (probe) /* opening a FIFO would wait for its reader */
        return access(target, W_OK) == 0
                   ? SF_OK
                   : sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int fd = open(target, O_WRONLY | O_NOCTTY);
    if (fd < 0) return sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int bad = write_all(fd, data, len) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    return SF_OK;
}

/* probe: make the temporary and remove it, leaving the target alone. */
static sf_status write_via_temp(const char *path, const char *target, const struct stat *old,
                                const char *data, size_t len, int probe, sf_error *err) {
    size_t n = strlen(target);
    char *tmp = malloc(n + 16);
    if (!tmp) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    /* name.tmp.XXXXXX beside the target; a name too long to take the suffix
     * gets .soapflow.XXXXXX in the same directory instead */
    const char *slash = strrchr(target, '/');
    size_t dir = slash ? (size_t)(slash - target) + 1 : 0;
    if (n - dir + sizeof ".tmp.XXXXXX" - 1 <= NAME_MAX)
        snprintf(tmp, n + 16, "%s.tmp.XXXXXX", target);
    else
        snprintf(tmp, n + 16, "%.*s.soapflow.XXXXXX", (int)dir, target);
    /* remembered before it exists: a signal that comes between mkstemp and
     * here would otherwise strand it */
    pending_tmp = tmp;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        sf_status st = sf_error_set(err, SF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        pending_tmp = NULL;
        free(tmp);
        return st;
    }
    /* mkstemp makes the file 0600: keep the mode of the file it replaces, or
     * give it the one a plain fopen would */
    mode_t mode;
    if (old) {
        mode = old->st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    (void)fchmod(fd, mode);
    int ok = write_all(fd, data, len) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && !probe && rename(tmp, target) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok || probe) unlink(tmp);
    pending_tmp = NULL;
    free(tmp);
    if (!ok) return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    return SF_OK;
}

/* The file path names once symbolic links are followed, whether or not it
 * exists (malloc'd; NULL when out of memory). After a loop it is still a
 * link. */
static char *follow_links(const char *path) {
    size_t n = strlen(path);
    char *cur = malloc(n + 1);
    if (!cur) return NULL;
    memcpy(cur, path, n + 1);
    char link[4096];
    for (int depth = 0; depth < 40; depth++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) break;
        ssize_t k = readlink(cur, link, sizeof link - 1);
        if (k <= 0) break;
        link[k] = '\0';
        /* a relative link is relative to the directory that holds it */
        const char *slash = strrchr(cur, '/');
        size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dir + (size_t)k + 1);
        if (!next) {
            free(cur);
            return NULL;
        }
        memcpy(next, cur, dir);
        memcpy(next + dir, link, (size_t)k + 1);
        free(cur);
        cur = next;
    }
    return cur;
}

static sf_status write_file(const char *path, const char *data, size_t len, int probe,
                            sf_error *err) {
    char *target = follow_links(path);
    if (!target) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    struct stat st;
    sf_status rc;
    if (lstat(target, &st) == 0 && S_ISLNK(st.st_mode))
        rc = sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", path, strerror(ELOOP));
    else if (stat(target, &st) != 0)
        rc = write_via_temp(path, target, NULL, data, len, probe, err);
    else if (S_ISDIR(st.st_mode))
        rc = sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", path, strerror(EISDIR));
    else if (S_ISREG(st.st_mode))
        rc = write_via_temp(path, target, &st, data, len, probe, err);
    else
        rc = write_in_place(path, target, data, len, probe, err);
    free(target);
    return rc;
}

sf_status sf_write_file_atomic(const char *path, const char *data, size_t len, sf_error *err) {
    return write_file(path, data, len, 0, err);
}

sf_status sf_write_file_check(const char *path, sf_error *err) {
    return write_file(path, "", 0, 1, err);
}

char *sf_read_file(const char *path, size_t *len, sf_error *err) {
    return sf_read_file_limit(path, SF_READ_FILE_MAX, len, err);
}

/* The whole file, NUL-terminated (one byte past its length), or NULL with err set. */
static char *read_all(const char *path, size_t max_bytes, size_t *len, sf_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int too_large = 0;
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n < cap - 1) break;
        if (n > max_bytes) {
            too_large = 1;
            break;
        }
        /* room for one byte past the bound, to tell a file of exactly
         * max_bytes from a larger one */
        size_t grow = cap > max_bytes / 2 ? max_bytes + 2 : cap * 2;
        char *nb = realloc(buf, grow);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap = grow;
    }
    int bad = ferror(f), bad_errno = errno;
    fclose(f);
    if (!buf) {
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (bad || too_large) {
        free(buf);
        if (too_large)
            sf_error_set(err, SF_ERR_RANGE,
                         "%s: larger than %zu bytes (not a file soapflow wrote?)", path, max_bytes);
        else
            sf_error_set(err, SF_ERR_IO, "%s: cannot read: %s", path, strerror(bad_errno));
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *sf_read_file_limit(const char *path, size_t max_bytes, size_t *len, sf_error *err) {
    size_t n = 0;
    char *buf = read_all(path, max_bytes, &n, err);
    if (!buf) return NULL;
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        sf_error_set(err, SF_ERR_PARSE, "%s: NUL byte at offset %zu: not a text file", path,
                     (size_t)(nul - buf));
        free(buf);
        return NULL;
    }
    if (len) *len = n;
    return buf;
}

void *sf_read_file_bytes(const char *path, size_t max_bytes, size_t *len, sf_error *err) {
    size_t n = 0;
    char *buf = read_all(path, max_bytes, &n, err);
    if (buf && len) *len = n;
    return buf;
}
