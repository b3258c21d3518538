/* Whole-file reads and atomic writes (io/file.c) on the paths a command line can
 * name: devices and FIFOs are written in place and never replaced, symbolic links
 * are followed, an endless stream is refused at the read bound, and a process
 * stopped by a signal in the middle of a write leaves no temporary file. */
#define _XOPEN_SOURCE 700 /* mknod */

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/io.h"

#define TMP_DIR_PATTERN "/tmp/sf_io_file_XXXXXX"
#include "lib/tmpdir.h"

/* Files in dir whose name holds ".tmp.": stranded temporaries. */
static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static void test_fifo_written_in_place(void **state) {
    (void)state;
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/out.fifo", tmp_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the reader: exit 0 iff it got the text */
        alarm(10);
        FILE *f = fopen(fifo, "rb");
        char buf[64] = {0};
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        _exit(n == 5 && memcmp(buf, "hello", 5) == 0 ? 0 : 1);
    }
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(fifo, "hello", 5, &err), SF_OK);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* not renamed over with a regular file */
    assert_int_equal(count_temps(tmp_dir), 0);
}

/* /dev/full (or, for root, who could replace the real one, a node of its own). */
static void test_full_device(void **state) {
    (void)state;
    char path[128] = "/dev/full";
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/full", tmp_dir);
        if (mknod(path, S_IFCHR | 0600, makedev(1, 7)) != 0) skip();
    } else if (access(path, W_OK) != 0) {
        skip();
    }
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(path, "{}\n", 3, &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No space left"));
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(count_temps(tmp_dir), 0);
}

static void test_symlink_followed(void **state) {
    (void)state;
    char sub[128], link[128], target[160];
    snprintf(sub, sizeof sub, "%s/sub", tmp_dir);
    snprintf(link, sizeof link, "%s/link.json", tmp_dir);
    snprintf(target, sizeof target, "%s/sub/target.json", tmp_dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(symlink("sub/target.json", link), 0); /* dangling, relative */
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(link, "one", 3, &err), SF_OK);
    chmod(target, 0640);
    assert_int_equal(sf_write_file_atomic(link, "two", 3, &err), SF_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640); /* the replaced file's mode is kept */
    size_t len = 0;
    char *text = sf_read_file(link, &len, &err);
    assert_non_null(text);
    assert_int_equal(len, 3);
    assert_string_equal(text, "two");
    free(text);

    char loop[128];
    snprintf(loop, sizeof loop, "%s/loop", tmp_dir);
    assert_int_equal(symlink("loop", loop), 0);
    assert_int_equal(sf_write_file_atomic(loop, "x", 1, &err), SF_ERR_IO);
    assert_int_equal(lstat(loop, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(count_temps(tmp_dir), 0);
    assert_int_equal(count_temps(sub), 0);
}

static void test_directory_refused(void **state) {
    (void)state;
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(tmp_dir, "x", 1, &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, "Is a directory"));
    assert_null(sf_read_file(tmp_dir, NULL, &err));
    assert_non_null(strstr(err.msg, "Is a directory")); /* says why, not just "read error" */
    assert_int_equal(count_temps(tmp_dir), 0);
}

static void test_read_bound(void **state) {
    (void)state;
    sf_error err = {0};
    if (access("/dev/zero", R_OK) == 0) { /* endless: stops at the bound */
        assert_null(sf_read_file_limit("/dev/zero", 1 << 20, NULL, &err));
        assert_int_equal(err.code, SF_ERR_RANGE);
        assert_non_null(strstr(err.msg, "/dev/zero"));
    }
    char path[128];
    snprintf(path, sizeof path, "%s/exact", tmp_dir);
    char data[10000];
    memset(data, 'a', sizeof data);
    assert_int_equal(sf_write_file_atomic(path, data, sizeof data, &err), SF_OK);
    size_t len = 0;
    char *text = sf_read_file_limit(path, sizeof data, &len, &err); /* exactly the bound */
    assert_non_null(text);
    assert_int_equal(len, sizeof data);
    free(text);
    assert_null(sf_read_file_limit(path, sizeof data - 1, &len, &err));
    assert_int_equal(err.code, SF_ERR_RANGE);
}

/* sf_write_file_check: the errors a write would give, and nothing touched. */
static void test_write_check(void **state) {
    (void)state;
    char path[128], fifo[128], missing[128];
    snprintf(path, sizeof path, "%s/kept.json", tmp_dir);
    snprintf(fifo, sizeof fifo, "%s/check.fifo", tmp_dir);
    snprintf(missing, sizeof missing, "%s/no/such.json", tmp_dir);
    sf_error err = {0};
    assert_int_equal(sf_write_file_check(path, &err), SF_OK);
    assert_int_equal(access(path, F_OK), -1); /* not created */
    assert_int_equal(sf_write_file_atomic(path, "old", 3, &err), SF_OK);
    assert_int_equal(sf_write_file_check(path, &err), SF_OK);
    char *text = sf_read_file(path, NULL, &err);
    assert_non_null(text);
    assert_string_equal(text, "old"); /* not truncated */
    free(text);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(sf_write_file_check(fifo, &err), SF_OK); /* no reader: does not wait */
    assert_int_equal(sf_write_file_check(missing, &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot create"));
    sf_error_clear(&err);
    assert_int_equal(sf_write_file_check(tmp_dir, &err), SF_ERR_IO);
    assert_int_equal(count_temps(tmp_dir), 0);
}

/* The text of path, or fail. */
static void assert_file_text(const char *path, const char *want) {
    sf_error err = {0};
    char *text = sf_read_file(path, NULL, &err);
    if (!text) fail_msg("%s: %s", path, err.msg);
    assert_string_equal(text, want);
    free(text);
}

/* sf_write_files_atomic: one file that cannot be written, wherever it comes in
 * the group, and none of the others is replaced; all good, all written. */
static void test_write_group_all_or_none(void **state) {
    (void)state;
    char sub[128], a[160], b[160], missing[160], full[160] = "/dev/full";
    snprintf(sub, sizeof sub, "%s/group", tmp_dir);
    snprintf(a, sizeof a, "%s/a.json", sub);
    snprintf(b, sizeof b, "%s/b.json", sub);
    snprintf(missing, sizeof missing, "%s/no/such.json", sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(a, "old a", 5, &err), SF_OK);
    assert_int_equal(sf_write_file_atomic(b, "old b", 5, &err), SF_OK);

    /* a missing directory last: the files before it are not replaced */
    sf_write_item bad_last[] = {{a, "new a", 5}, {b, "new b", 5}, {missing, "x", 1}};
    assert_int_equal(sf_write_files_atomic(bad_last, 3, &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, missing));
    assert_file_text(a, "old a");
    assert_file_text(b, "old b");
    /* a directory first: the same */
    sf_write_item bad_first[] = {{sub, "x", 1}, {a, "new a", 5}};
    sf_error_clear(&err);
    assert_int_equal(sf_write_files_atomic(bad_first, 2, &err), SF_ERR_IO);
    assert_file_text(a, "old a");
    /* a device that fails as it is written (no check finds that beforehand):
     * the regular files are still not replaced */
    int have_full = 1;
    if (geteuid() == 0) {
        snprintf(full, sizeof full, "%s/full", sub);
        have_full = mknod(full, S_IFCHR | 0600, makedev(1, 7)) == 0;
    } else {
        have_full = access(full, W_OK) == 0;
    }
    if (have_full) {
        sf_write_item bad_dev[] = {{a, "new a", 5}, {full, "{}", 2}, {b, "new b", 5}};
        sf_error_clear(&err);
        assert_int_equal(sf_write_files_atomic(bad_dev, 3, &err), SF_ERR_IO);
        assert_non_null(strstr(err.msg, "No space left"));
        assert_file_text(a, "old a");
        assert_file_text(b, "old b");
    }
    assert_int_equal(count_temps(sub), 0);

    sf_write_item good[] = {{a, "new a", 5}, {b, "new b", 5}};
    assert_int_equal(sf_write_files_atomic(good, 2, &err), SF_OK);
    assert_file_text(a, "new a");
    assert_file_text(b, "new b");
    assert_int_equal(count_temps(sub), 0);
    /* more than the group takes is refused before anything is touched */
    sf_write_item many[SF_WRITE_FILES_MAX + 1];
    for (int i = 0; i <= SF_WRITE_FILES_MAX; i++) many[i] = (sf_write_item){a, "many", 4};
    assert_int_equal(sf_write_files_atomic(many, SF_WRITE_FILES_MAX + 1, &err), SF_ERR_INVALID);
    assert_file_text(a, "new a");
}

/* A name too long to take the ".tmp.XXXXXX" suffix (NAME_MAX 255) is still
 * written whole, through a short temporary in the same directory. */
static void test_long_name(void **state) {
    (void)state;
    char sub[128], path[512];
    snprintf(sub, sizeof sub, "%s/long", tmp_dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    int n = snprintf(path, sizeof path, "%s/", sub);
    memset(path + n, 'a', 250);
    strcpy(path + n + 250, ".json"); /* 255 bytes: the longest name there is */
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(path, "{}", 2, &err), SF_OK);
    char *text = sf_read_file(path, NULL, &err);
    assert_non_null(text);
    assert_string_equal(text, "{}");
    free(text);
    DIR *d = opendir(sub);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) entries += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(entries, 1); /* the file, no temporary left */
    assert_int_equal(count_temps(sub), 0);
}

/* A signal that stops the program in the middle of a write: the child passes a
 * file size limit halfway, whose SIGXFSZ comes inside write(2); its handler does
 * what soapflow's does for SIGINT and SIGTERM (sf_write_file_abort, then end). */
static void on_xfsz(int sig) {
    (void)sig;
    sf_write_file_abort();
    _exit(3);
}

static void test_signal_mid_write(void **state) {
    (void)state;
    char sub[128], path[160];
    snprintf(sub, sizeof sub, "%s/sig", tmp_dir);
    snprintf(path, sizeof path, "%s/sig/big.json", tmp_dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, on_xfsz);
        struct rlimit rl = {64 * 1024, 64 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(4);
        size_t n = 1 << 20;
        char *data = malloc(n);
        if (!data) _exit(5);
        memset(data, 'x', n);
        sf_error err = {0};
        sf_write_file_atomic(path, data, n, &err);
        _exit(6); /* not reached: the limit stops the write */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    assert_int_equal(count_temps(sub), 0);
    assert_int_equal(access(path, F_OK), -1); /* and no half file at the path */
}

/* A signal in the middle of the second file of a group: the first one's
 * temporary, already written and waiting for its rename, goes too. */
static void test_signal_mid_group(void **state) {
    (void)state;
    char sub[128], small[160], big[160];
    snprintf(sub, sizeof sub, "%s/siggroup", tmp_dir);
    snprintf(small, sizeof small, "%s/small.json", sub);
    snprintf(big, sizeof big, "%s/big.json", sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, on_xfsz);
        struct rlimit rl = {64 * 1024, 64 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(4);
        size_t n = 1 << 20;
        char *data = malloc(n);
        if (!data) _exit(5);
        memset(data, 'x', n);
        sf_write_item items[] = {{small, "{}", 2}, {big, data, n}};
        sf_error err = {0};
        sf_write_files_atomic(items, 2, &err);
        _exit(6); /* not reached: the limit stops the write */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    assert_int_equal(count_temps(sub), 0);
    assert_int_equal(access(small, F_OK), -1);
    assert_int_equal(access(big, F_OK), -1);
}

/* A writer that stops for good in the middle of a write, holding its
 * temporary: SIGXFSZ at the file size limit, and a handler that waits there
 * for the SIGKILL the test sends (a writer frozen mid-write, then killed). */
static void on_xfsz_wait(int sig) {
    (void)sig;
    for (;;) pause();
}

/* The size of the one temporary of target `base` in dir (base.tmp.XXXXXX, not
 * another target's), or -1 when there is none. */
static long temp_size(const char *dir, const char *base, char *name, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    long size = -1;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0) size = (long)st.st_size;
        snprintf(name, cap, "%s", path);
    }
    closedir(d);
    return size;
}

/* Issue 29, item 6: a writer killed by SIGKILL leaves its temporary; the next
 * write of the same target removes it, but never the temporary of a writer
 * still at work, nor one of another target. */
static void test_stale_temporaries(void **state) {
    (void)state;
    char sub[128], path[160], other[192], tmp_name[512];
    snprintf(sub, sizeof sub, "%s/stale", tmp_dir);
    snprintf(path, sizeof path, "%s/ck.st", sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    /* a temporary of another target: kept */
    snprintf(other, sizeof other, "%s/ck.st2.tmp.AbC123", sub);
    FILE *o = fopen(other, "wb");
    assert_non_null(o);
    fclose(o);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, on_xfsz_wait);
        alarm(120); /* never outlive a parent whose assertion failed before its kill */
        struct rlimit rl = {64 * 1024, 64 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(4);
        size_t n = 1 << 20;
        char *data = malloc(n);
        if (!data) _exit(5);
        memset(data, 'x', n);
        sf_error err = {0};
        sf_write_file_atomic(path, data, n, &err);
        _exit(6); /* not reached */
    }
    /* wait until the child sits at the limit, its temporary 64 KiB */
    long size = -1;
    for (int i = 0; i < 1000 && size != 64 * 1024; i++) {
        nanosleep(&(struct timespec){0, 10000000}, NULL);
        size = temp_size(sub, "ck.st", tmp_name, sizeof tmp_name);
    }
    assert_int_equal(size, 64 * 1024);
    /* a write of the same target meanwhile: the live writer's temporary stays */
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(path, "one", 3, &err), SF_OK);
    assert_int_equal(access(tmp_name, F_OK), 0);
    /* killed: its temporary is stale, and the next write (or check) removes it */
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(access(tmp_name, F_OK), 0);
    assert_int_equal(sf_write_file_check(path, &err), SF_OK);
    assert_int_equal(access(tmp_name, F_OK), -1);
    assert_int_equal(access(other, F_OK), 0);
    char *text = sf_read_file(path, NULL, &err);
    assert_non_null(text);
    assert_string_equal(text, "one");
    free(text);
}

/* Issue 29, item 6: writes go out in chunks and look for sf_write_file_abort
 * between them; once it was called (a stop signal's handler), a write stops
 * and leaves no temporary. A large write, in many chunks, arrives whole. */
static void test_abort_stops_writes(void **state) {
    (void)state;
    char sub[128], path[160];
    snprintf(sub, sizeof sub, "%s/abort", tmp_dir);
    snprintf(path, sizeof path, "%s/big.bin", sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    size_t n = (9u << 20) + 123; /* over nine chunks */
    char *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++) data[i] = (char)(i * 7 + i / 4096);
    sf_error err = {0};
    assert_int_equal(sf_write_file_atomic(path, data, n, &err), SF_OK);
    size_t len = 0;
    char *back = sf_read_file_bytes(path, n + 1, &len, &err);
    assert_non_null(back);
    assert_int_equal(len, n);
    assert_memory_equal(back, data, n);
    free(back);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sf_write_file_abort();
        sf_error e2 = {0};
        sf_status st = sf_write_file_atomic(path, data, n, &e2);
        _exit(st == SF_OK ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_temps(sub), 0);
    back = sf_read_file_bytes(path, n + 1, &len, &err); /* the old file is intact */
    assert_non_null(back);
    assert_int_equal(len, n);
    free(back);
    free(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_written_in_place),
        cmocka_unit_test(test_write_group_all_or_none),
        cmocka_unit_test(test_signal_mid_group),
        cmocka_unit_test(test_full_device),
        cmocka_unit_test(test_symlink_followed),
        cmocka_unit_test(test_directory_refused),
        cmocka_unit_test(test_read_bound),
        cmocka_unit_test(test_write_check),
        cmocka_unit_test(test_long_name),
        cmocka_unit_test(test_signal_mid_write),
        cmocka_unit_test(test_stale_temporaries),
        cmocka_unit_test(test_abort_stops_writes),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
