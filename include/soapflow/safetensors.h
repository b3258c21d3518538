/*
 * soapflow/safetensors.h - checkpoints: named fp32 tensors in the safetensors format.
 *
 *     sf_error err = {0};
 *     sf_st_tensor t[2] = {
 *         {.name = "fc3.weight", .ndim = 2, .shape = {10, 84}, .data = w},
 *         {.name = "fc3.bias", .ndim = 1, .shape = {10}, .data = b}};
 *     const char *keys[] = {"step"}, *values[] = {"1200"};
 *     sf_safetensors_write("ckpt.safetensors", t, 2, keys, values, 1, &err);  // atomic
 *
 *     sf_st_file *f = sf_safetensors_read("ckpt.safetensors", &err);
 *     if (!f) fprintf(stderr, "%s\n", err.msg);  // "ckpt.safetensors: tensor 'fc3.bias': ..."
 *     const sf_st_tensor *wt = sf_safetensors_find(f, "fc3.weight"); // NULL when absent
 *     for (size_t i = 0; i < sf_safetensors_count(f); i++) puts(sf_safetensors_at(f, i)->name);
 *     const char *step = sf_safetensors_meta(f, "step");                // NULL when absent
 *     sf_safetensors_free(f);
 *
 * The format (docs/formats-checkpoint.md): 8 bytes, the little-endian length N of
 * a JSON header; N bytes of header, {"name": {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}; then the
 * tensors' raw little-endian bytes, offsets counted from the end of the header.
 * Files this writes are the bytes the reference implementation (Python's
 * safetensors) writes for the same tensors: tensors sorted by name, compact JSON,
 * the header padded with spaces to a multiple of 8 bytes. The reader accepts what
 * the reference reader accepts, except tensors of other dtypes than F32, more than
 * SF_ST_MAX_DIMS dimensions, and duplicate names, which it refuses by name.
 *
 * Little-endian hosts only: on a big-endian one both directions return
 * SF_ERR_UNSUPPORTED rather than byte-swap code no test here could run.
 */
#ifndef SOAPFLOW_SAFETENSORS_H
#define SOAPFLOW_SAFETENSORS_H

#include "soapflow/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions of a tensor here (a conv weight has 4). */
#define SF_ST_MAX_DIMS 8
/* The longest header read, the reference reader's bound (bytes). */
#define SF_ST_HEADER_MAX 100000000

/* One named fp32 tensor, C order. Writing: fill name, ndim, shape and data (numel
 * is ignored). Reading: every field is set, pointing into the file object. */
typedef struct sf_st_tensor {
    const char *name;              /* unique in a file; not "__metadata__" */
    int ndim;                      /* 0 (a scalar) to SF_ST_MAX_DIMS */
    int64_t shape[SF_ST_MAX_DIMS]; /* extents, each >= 0 */
    int64_t numel;                 /* product of the extents */
    const float *data;             /* numel floats (may be NULL when numel is 0) */
} sf_st_tensor;

/* ---- writing ----------------------------------------------------------- */

/* The file's bytes in one malloc'd buffer (*out, *len), for n tensors and n_meta
 * metadata entries (keys unique; keys and values UTF-8 text). Errors name the
 * tensor: a duplicate or empty name, a negative extent, sizes that overflow. */
SF_API sf_status sf_safetensors_encode(const sf_st_tensor *tensors, size_t n,
                                       const char *const *meta_keys, const char *const *meta_values,
                                       size_t n_meta, char **out, size_t *len, sf_error *err);
/* Write them to path atomically (sf_write_file_atomic): on any failure no file is
 * left and an existing one is untouched. */
SF_API sf_status sf_safetensors_write(const char *path, const sf_st_tensor *tensors, size_t n,
                                      const char *const *meta_keys, const char *const *meta_values,
                                      size_t n_meta, sf_error *err);

/* ---- reading ----------------------------------------------------------- */

typedef struct sf_st_file sf_st_file;

/* Read and validate a whole file: the header length against the file size, the
 * header as JSON, each tensor's dtype (F32), shape and data_offsets (extent =
 * 4 x the product of the shape), and the data offsets tiling the data section
 * exactly (no overlap, no hole, nothing after the last tensor). NULL on error
 * with a one-line message "FILE: byte K: ..." or "FILE: tensor 'NAME': ...". */
SF_API sf_st_file *sf_safetensors_read(const char *path, sf_error *err);
/* The same on bytes in memory (copied); origin names them in messages. */
SF_API sf_st_file *sf_safetensors_parse(const void *bytes, size_t len, const char *origin,
                                        sf_error *err);
SF_API void sf_safetensors_free(sf_st_file *f);

/* The tensors in file order (by data offset), i < count. */
SF_API size_t sf_safetensors_count(const sf_st_file *f);
SF_API const sf_st_tensor *sf_safetensors_at(const sf_st_file *f, size_t i);
/* The tensor of that name, or NULL. */
SF_API const sf_st_tensor *sf_safetensors_find(const sf_st_file *f, const char *name);

/* The "__metadata__" entries, in file order, and the value of one key (NULL when
 * absent). */
SF_API size_t sf_safetensors_meta_count(const sf_st_file *f);
SF_API const char *sf_safetensors_meta_key(const sf_st_file *f, size_t i);
SF_API const char *sf_safetensors_meta_value(const sf_st_file *f, size_t i);
SF_API const char *sf_safetensors_meta(const sf_st_file *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
