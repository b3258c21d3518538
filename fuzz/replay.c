/*
 * replay.c - a main() for a harness without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on every file named or found (one level deep)
 * in the folders named, and fails as the harness fails (its checks abort).
 * The ordinary build links each fuzz/fuzz_NAME.c with it into
 * fuzz_replay_NAME, and ctest replays the seed corpus fuzz/corpus/NAME/ and
 * the inputs of past findings tests/fuzz/NAME/ (a failure the fuzzer found
 * stays fixed), with gcc and under the sanitizer suite, no clang needed.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Harnesses without set-up do not define it. */
#pragma weak LLVMFuzzerInitialize

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return 1;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *data = malloc(n ? n : 1);
    if (!data || fread(data, 1, n, f) != n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        fclose(f);
        return 1;
    }
    fclose(f);
    (void)LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The files of a folder, in name order (so that a failure repeats the same way). */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) return replay_file(dir) == 0 ? (++*count, 0) : 1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) abort();
            names = grown;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) abort();
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        rc |= replay_file(names[i]);
        free(names[i]);
        ++*count;
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0, count = 0;
    for (int i = 1; i < argc; i++) rc |= replay_dir(argv[i], &count);
    printf("replay: %d inputs, %s\n", count, rc ? "some unreadable" : "every check held");
    return rc;
}
