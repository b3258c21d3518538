/*
 * tests/lib/tmpdir.h - a temporary directory for one cmocka group: the group's
 * setup makes it, its teardown removes it with everything written in it.
 *
 *     #define TMP_DIR_PATTERN "/tmp/sf_mine_XXXXXX"
 *     #include "lib/tmpdir.h"
 *     ...
 *     return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
 *
 * Header only, for the test programs that include it (each is one file).
 */
#ifndef SOAPFLOW_TESTS_TMPDIR_H
#define SOAPFLOW_TESTS_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TMP_DIR_PATTERN
#error "define TMP_DIR_PATTERN (a mkdtemp template) before including lib/tmpdir.h"
#endif

static char tmp_dir[64];

/* Remove dir and everything under it; symbolic links are removed, not followed. */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int make_tmp_dir(void **state) {
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "%s", TMP_DIR_PATTERN);
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
    (void)state;
    remove_tree(tmp_dir);
    return 0;
}

#endif
