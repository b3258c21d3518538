/*
 * file.c - whole-file reads and atomic writes.
 *
 * Writers never leave half a file: the text goes to a temporary file in the
 * target's directory (so rename is atomic on one file system) and is renamed
 * over the target only when every byte is written and the file is closed.
 * A command that writes several files (a strategy, a trace and a picture)
 * writes them as one group (sf_write_files_atomic): every temporary is written
 * and closed before the first rename, so a failure on any of them (a missing
 * directory, a full disk) replaces none of the files already there.
 * The temporaries being written are remembered, so that a program that stops on
 * a signal can remove them (sf_write_file_abort) rather than leave them behind.
 * Blocking the signals while it exists was the other way; it does not work
 * once a library (OpenBLAS) has started threads that do not block them, as
 * the signal then kills the process from one of those.
 *
 * Data goes out in writes of at most WRITE_CHUNK bytes, and sf_write_file_abort
 * is checked between them. One write() of a whole 150 MB checkpoint does not
 * return to take a caught signal until it is done, while SIGKILL ends it at
 * once: mpirun sends SIGTERM and, a second later, SIGKILL, and the handler
 * that would have removed the temporary never ran. In chunks, SIGTERM is taken
 * within one chunk's write.
 *
 * What no handler can catch (SIGKILL, a crash, a power cut) still strands a
 * temporary, so every write first removes the stale temporaries of its target
 * (<target>.tmp.XXXXXX). A live writer's temporary is told from a stale one by
 * a lock: the writer holds an flock on it from creation to rename, and the
 * kernel drops the lock when the process dies; a temporary whose lock can be
 * taken is stale. (The .soapflow.XXXXXX names of targets too long for the
 * suffix name no target and are not swept.)
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "soapflow/io.h"

/* The temporaries of the write in progress (NULL where none): one write at a
 * time, of at most SF_WRITE_FILES_MAX files. */
static char *volatile pending_tmp[SF_WRITE_FILES_MAX];

/* Set by sf_write_file_abort: the program is stopping, nothing more is written. */
static volatile sig_atomic_t aborted;

/* The most bytes one write() call is given (see the top of the file). */
#define WRITE_CHUNK ((size_t)1 << 20)

void sf_write_file_abort(void) {
    aborted = 1;
    for (int i = 0; i < SF_WRITE_FILES_MAX; i++) {
        char *tmp = pending_tmp[i];
        if (tmp) unlink(tmp); /* async-signal-safe */
    }
}

/* Write all of data to fd in chunks; 0, or -1 with errno set (EINTR once
 * sf_write_file_abort was called). */
static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        if (aborted) {
            errno = EINTR;
            return -1;
        }
        ssize_t k = write(fd, data, len < WRITE_CHUNK ? len : WRITE_CHUNK);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += k;
        len -= (size_t)k;
    }
    return 0;
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

/* One file of a write, from its target's kind to its temporary. */
typedef struct staged {
    const char *path; /* as given, for messages */
    char *target;     /* links followed */
    int in_place;     /* an existing device or FIFO: written through, never replaced */
    int has_old;      /* a regular file is there: its mode is kept */
    mode_t old_mode;
    int slot;    /* index in pending_tmp while tmp exists, else -1 */
    char *tmp;   /* the written temporary, waiting to be renamed over target */
    int lock_fd; /* open on tmp, holding its flock until the rename; -1 when none */
} staged;

/* Remove the stale temporaries of target: <target>.tmp.XXXXXX files that no
 * live writer holds locked (a writer killed by SIGKILL, a crash). Best effort:
 * what cannot be opened or removed stays. */
static void remove_stale(const char *target) {
    const char *slash = strrchr(target, '/');
    size_t dir_len = slash ? (size_t)(slash - target) : 0;
    const char *base = slash ? slash + 1 : target;
    size_t base_len = strlen(base);
    if (!slash) dir_len = 1;               /* "." */
    else if (dir_len == 0) dir_len = 1;    /* "/x": the root */
    char *dir = malloc(dir_len + 1);
    if (!dir) return;
    memcpy(dir, slash ? target : ".", dir_len);
    dir[dir_len] = '\0';
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, base, base_len) != 0 || strncmp(n + base_len, ".tmp.", 5) != 0 ||
            strlen(n + base_len + 5) != 6)
            continue;
        size_t plen = strlen(dir) + 1 + strlen(n) + 1;
        char *path = malloc(plen);
        if (!path) break;
        snprintf(path, plen, "%s/%s", dir, n);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlink(path); /* while locked: a writer that opens it now sees it gone */
        if (fd >= 0) close(fd);
        free(path);
    }
    if (d) closedir(d);
    free(dir);
}

/* What path names, or the error a write to it would give (nothing made). */
static sf_status classify(staged *f, sf_error *err) {
    f->target = follow_links(f->path);
    if (!f->target) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    struct stat st;
    if (lstat(f->target, &st) == 0 && S_ISLNK(st.st_mode))
        return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", f->path, strerror(ELOOP));
    if (stat(f->target, &st) != 0) return SF_OK; /* a new file */
    if (S_ISDIR(st.st_mode))
        return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", f->path, strerror(EISDIR));
    if (S_ISREG(st.st_mode)) {
        f->has_old = 1;
        f->old_mode = st.st_mode & 07777;
    } else {
        f->in_place = 1;
    }
    return SF_OK;
}

/* Write data to a temporary beside f->target (name.tmp.XXXXXX; a name too long
 * to take the suffix gets .soapflow.XXXXXX in the same directory), closed and
 * left for commit or discard. */
static sf_status stage(staged *f, const char *data, size_t len, sf_error *err) {
    size_t n = strlen(f->target);
    char *tmp = malloc(n + 16);
    if (!tmp) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    const char *slash = strrchr(f->target, '/');
    size_t dir = slash ? (size_t)(slash - f->target) + 1 : 0;
    if (n - dir + sizeof ".tmp.XXXXXX" - 1 <= NAME_MAX)
        snprintf(tmp, n + 16, "%s.tmp.XXXXXX", f->target);
    else
        snprintf(tmp, n + 16, "%.*s.soapflow.XXXXXX", (int)dir, f->target);
    /* remembered before it exists: a signal that comes between mkstemp and
     * here would otherwise strand it */
    f->tmp = tmp;
    pending_tmp[f->slot] = tmp;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        memcpy(tmp + strlen(tmp) - 6, "XXXXXX", 6);
        fd = mkstemp(tmp);
        if (fd < 0) break;
        /* the lock that tells a live writer from a stale one (remove_stale);
         * where a file system has no locks, neither side takes one and
         * nothing is swept. A sweep may have taken the name between mkstemp
         * and the lock: then the file is gone (no links), and another name
         * is drawn. */
        f->lock_fd = open(tmp, O_RDONLY | O_NOCTTY);
        if (f->lock_fd >= 0 && flock(f->lock_fd, LOCK_EX) != 0) {
            close(f->lock_fd);
            f->lock_fd = -1;
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_nlink > 0) break;
        if (f->lock_fd >= 0) close(f->lock_fd);
        f->lock_fd = -1;
        close(fd);
        fd = -1;
        errno = EEXIST;
    }
    if (fd < 0) {
        sf_status st =
            sf_error_set(err, SF_ERR_IO, "%s: cannot create: %s", f->path, strerror(errno));
        pending_tmp[f->slot] = NULL;
        f->tmp = NULL;
        free(tmp);
        return st;
    }
    /* mkstemp makes the file 0600: keep the mode of the file it replaces, or
     * give it the one a plain fopen would */
    mode_t mode;
    if (f->has_old) {
        mode = f->old_mode;
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
    if (!ok) return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", f->path, strerror(e));
    return SF_OK;
}

/* An existing device or FIFO: opened without O_CREAT, so that it can never
 * turn into a regular file here. probe: only whether it could be opened
 * (opening a FIFO would wait for its reader). */
static sf_status write_in_place(const staged *f, const char *data, size_t len, int probe,
                                sf_error *err) {
    if (probe)
        return access(f->target, W_OK) == 0
                   ? SF_OK
                   : sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
    int fd = open(f->target, O_WRONLY | O_NOCTTY);
    if (fd < 0)
        return sf_error_set(err, SF_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
    int bad = write_all(fd, data, len) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) return sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", f->path, strerror(e));
    return SF_OK;
}

/* Remove f's temporary, if any, and forget it; release its lock. */
static void discard(staged *f) {
    if (f->tmp) {
        unlink(f->tmp);
        pending_tmp[f->slot] = NULL;
        free(f->tmp);
        f->tmp = NULL;
    }
    if (f->lock_fd >= 0) close(f->lock_fd);
    f->lock_fd = -1;
}

/* All of files, or (probe) only whether they could be written now. Every
 * check and every temporary comes before the first file is touched: a target
 * that cannot be written, a temporary that cannot be made or filled (a full
 * disk, a file size limit), and nothing is replaced. Then devices and FIFOs
 * are written through (a failure there still replaces no regular file), then
 * the temporaries are renamed over their targets, which fails only when the
 * directories change underneath. */
static sf_status write_files(const sf_write_item *files, int n, int probe, sf_error *err) {
    if (n < 0 || n > SF_WRITE_FILES_MAX || (n > 0 && !files))
        return sf_error_set(err, SF_ERR_INVALID, "sf_write_files_atomic: %d files (at most %d)", n,
                            SF_WRITE_FILES_MAX);
    staged f[SF_WRITE_FILES_MAX];
    memset(f, 0, sizeof f);
    for (int k = 0; k < SF_WRITE_FILES_MAX; k++) f[k].lock_fd = -1;
    sf_status st = SF_OK;
    int i;
    for (i = 0; i < n; i++) {
        f[i].path = files[i].path;
        f[i].slot = i;
        if (!files[i].path || (!files[i].data && files[i].len > 0)) {
            st = sf_error_set(err, SF_ERR_INVALID, "sf_write_files_atomic: file %d: no %s", i,
                              files[i].path ? "data" : "path");
            break;
        }
        if ((st = classify(&f[i], err)) != SF_OK) break;
    }
    for (i = 0; st == SF_OK && i < n; i++) {
        if (f[i].in_place) continue;
        remove_stale(f[i].target);
        st = stage(&f[i], probe ? "" : files[i].data, probe ? 0 : files[i].len, err);
    }
    for (i = 0; st == SF_OK && i < n; i++)
        if (f[i].in_place) st = write_in_place(&f[i], files[i].data, files[i].len, probe, err);
    for (i = 0; st == SF_OK && !probe && i < n; i++) {
        if (!f[i].tmp) continue;
        if (rename(f[i].tmp, f[i].target) != 0) {
            st = sf_error_set(err, SF_ERR_IO, "%s: cannot write: %s", f[i].path, strerror(errno));
            break;
        }
        pending_tmp[f[i].slot] = NULL;
        free(f[i].tmp);
        f[i].tmp = NULL;
    }
    for (i = 0; i < n; i++) {
        discard(&f[i]);
        free(f[i].target);
    }
    return st;
}

sf_status sf_write_files_atomic(const sf_write_item *files, int n, sf_error *err) {
    return write_files(files, n, 0, err);
}

sf_status sf_write_file_atomic(const char *path, const char *data, size_t len, sf_error *err) {
    sf_write_item one = {path, data, len};
    return write_files(&one, 1, 0, err);
}

sf_status sf_write_file_check(const char *path, sf_error *err) {
    sf_write_item one = {path, "", 0};
    return write_files(&one, 1, 1, err);
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
