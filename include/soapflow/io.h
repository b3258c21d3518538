/*
 * soapflow/io.h - reading and writing files: model JSON and ONNX, machine JSON, strategy
 * JSON, DOT.
 *
 *     sf_error err = {0};
 *     sf_graph *g = sf_model_load_json("net.json", &err);
 *     if (!g) { fprintf(stderr, "%s\n", err.msg); return 1; } // "net.json:12:5: operator ..."
 *     sf_model_save_json(g, "copy.json", &err);    // written to a temporary, then renamed
 *     sf_graph_free(g);
 *
 * Formats are documented in docs/formats.md. Every writer writes to a temporary
 * file beside the target and renames it, so a failure never leaves a half file.
 * Every reader's message names the file, the line and column where it can, and
 * the operator or field concerned.
 */
#ifndef SOAPFLOW_IO_H
#define SOAPFLOW_IO_H

#include "soapflow/core.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- files ------------------------------------------------------------- */

/* Write data to path atomically: path.tmp.XXXXXX (.soapflow.XXXXXX beside it for
 * a name too long to take that suffix), fsync-free rename over path
 * (over the file a symbolic link names). An existing device or FIFO
 * (/dev/null) is written in place instead, never replaced. The temporary is
 * flock'ed while it is written, and a write first removes the path.tmp.XXXXXX
 * files no live writer holds (left by a writer killed with SIGKILL). */
SF_API sf_status sf_write_file_atomic(const char *path, const char *data, size_t len,
                                      sf_error *err);
/* One file of a group written together. */
typedef struct sf_write_item {
    const char *path;
    const char *data;
    size_t len; /* bytes of data */
} sf_write_item;
/* The most files one sf_write_files_atomic call takes. */
#define SF_WRITE_FILES_MAX 8
/* Write n files (at most SF_WRITE_FILES_MAX) all or nothing, as
 * sf_write_file_atomic writes one: every path is checked and every temporary
 * written and closed before any target is touched, so that one failure (a
 * missing directory, a full disk) replaces none of the others. Then devices
 * and FIFOs are written in place, then the temporaries renamed over their
 * targets in order (which fails only if the directories change meanwhile). */
SF_API sf_status sf_write_files_atomic(const sf_write_item *files, int n, sf_error *err);
/* Whether sf_write_file_atomic could write path now, with its messages: the
 * temporary file is made and removed, path itself is left alone. For a
 * command that works for minutes before it writes. */
SF_API sf_status sf_write_file_check(const char *path, sf_error *err);
/* Remove the temporary files of a write in progress, if any: for a signal
 * handler that ends the program (async-signal-safe). Writes stop at their next
 * chunk (1 MiB), and every write after it fails (EINTR). */
SF_API void sf_write_file_abort(void);

/* The largest file sf_read_file reads (1 GiB): a bound for a path that names
 * an endless stream such as /dev/zero. */
#define SF_READ_FILE_MAX ((size_t)1 << 30)
/* Read a whole text file into a malloc'd NUL-terminated buffer (SF_ERR_RANGE
 * past SF_READ_FILE_MAX bytes). A NUL byte in the file is an error
 * (SF_ERR_PARSE): readers that take the text as a C string would silently drop
 * whatever follows it. */
SF_API char *sf_read_file(const char *path, size_t *len, sf_error *err);
/* The same with another bound. */
SF_API char *sf_read_file_limit(const char *path, size_t max_bytes, size_t *len, sf_error *err);
/* A whole binary file (NUL bytes and all) into a malloc'd buffer of *len bytes
 * (plus a NUL after them), at most max_bytes (SF_ERR_RANGE past them). */
SF_API void *sf_read_file_bytes(const char *path, size_t max_bytes, size_t *len, sf_error *err);

/* ---- model files (JSON) ------------------------------------------------ */

SF_API sf_graph *sf_model_load_json(const char *path, sf_error *err);
/* `origin` names the text in messages (a file name). */
SF_API sf_graph *sf_model_parse_json(const char *text, const char *origin, sf_error *err);
/* malloc'd JSON text (caller frees), indented, stable field order. */
SF_API char *sf_model_to_json(const sf_graph *g, sf_error *err);
SF_API sf_status sf_model_save_json(const sf_graph *g, const char *path, sf_error *err);

/* ---- ONNX models (docs/formats-onnx.md) -------------------------------- */

/* Import an ONNX model (opsets 9 to 17) as a graph. `batch` is the size given to
 * a dynamic (symbolic) batch dimension of the graph inputs; a file whose inputs
 * have fixed shapes keeps its batch and ignores it. With weights non-NULL, the
 * initializers become the operators' weights: *weights gets a malloc'd
 * full-layout buffer for every operator that owns weights (NULL for the others,
 * sf_graph_num_ops entries, as sf_params_new makes them; free with
 * sf_onnx_weights_free), or NULL when the file does not hold every weight (a
 * model exported without its parameters). Every failure is one line naming the
 * file and, where there is one, the node: unsupported operators (each type, its
 * count and its first node, all in one message), malformed protobuf (the byte
 * offset and the field), cycles, shape mismatches. */
SF_API sf_status sf_onnx_load(const char *path, int64_t batch, sf_graph **g, float ***weights,
                              sf_error *err);
/* The same from len bytes in memory; `origin` names them in messages. */
SF_API sf_status sf_onnx_parse(const void *data, size_t len, const char *origin, int64_t batch,
                               sf_graph **g, float ***weights, sf_error *err);
SF_API void sf_onnx_weights_free(const sf_graph *g, float **weights);
/* What ONNX cannot say: which initializers named as a module's state are
 * registered buffers (register_buffer), not parameters. A listed initializer
 * that is an Add or Mul operand is a fixed tensor (add_const, mul_const; a
 * scalar a scale), not trained and not counted; unlisted, it is learned
 * (add_param, mul_param). */
typedef struct sf_onnx_options {
    /* a JSON array of initializer names ("buffers file"), as make_onnx_fixtures.py
     * writes from named_buffers(); NULL: sf_onnx_load_opts reads <model>.buffers.json
     * beside the model when there is one (the model path less ".onnx") */
    const char *buffers_file;
    const char *const *buffers; /* more names (NULL: none) */
    int n_buffers;
} sf_onnx_options;
/* sf_onnx_load and sf_onnx_parse with options (NULL: none; sf_onnx_load is
 * sf_onnx_load_opts with NULL, and so reads the sidecar file too). A buffers
 * file that cannot be read or is not an array of strings is one line naming it. */
SF_API sf_status sf_onnx_load_opts(const char *path, int64_t batch, const sf_onnx_options *o,
                                   sf_graph **g, float ***weights, sf_error *err);
SF_API sf_status sf_onnx_parse_opts(const void *data, size_t len, const char *origin,
                                    int64_t batch, const sf_onnx_options *o, sf_graph **g,
                                    float ***weights, sf_error *err);
/* The buffers file sf_onnx_load_opts reads beside path without one given:
 * malloc'd "<path less .onnx>.buffers.json" (caller frees), NULL without memory. */
SF_API char *sf_onnx_buffers_path(const char *path);
/* 1 when name ends in ".onnx". */
SF_API int sf_onnx_is_path(const char *name);

/* ---- machine files (JSON) ---------------------------------------------- */

SF_API sf_status sf_machine_desc_parse_json(const char *text, const char *origin,
                                            sf_machine_desc *out, sf_error *err);
SF_API sf_status sf_machine_desc_load_json(const char *path, sf_machine_desc *out, sf_error *err);
SF_API char *sf_machine_desc_to_json(const sf_machine_desc *d, sf_error *err);
SF_API sf_status sf_machine_desc_save_json(const sf_machine_desc *d, const char *path,
                                           sf_error *err);
/* A preset name or a JSON file path; "NAME[N]" takes the first N devices of it
 * (sf_machine_subset), e.g. "p100-4x4[8]" is two nodes of the P100 cluster.
 * N must be at most one node's devices or a whole number of nodes (on a
 * pcie_tree node, within one node: below its pcie_group or a multiple of it):
 * p100-4x4 takes 1 to 4, 8, 12 or 16. A message names the machine as written
 * ("machine 'my.json[3]': ..."), not by the file's "name" field. */
SF_API sf_machine *sf_machine_open(const char *name_or_path, sf_error *err);

/* ---- strategy files (JSON) --------------------------------------------- */

SF_API sf_status sf_strategy_load_json(sf_strategy *s, const char *path, const sf_graph *g,
                                       const sf_machine *m, sf_error *err);
SF_API sf_status sf_strategy_parse_json(sf_strategy *s, const char *text, const char *origin,
                                        const sf_graph *g, const sf_machine *m, sf_error *err);
SF_API char *sf_strategy_to_json(const sf_strategy *s, const sf_graph *g, sf_error *err);
SF_API sf_status sf_strategy_save_json(const sf_strategy *s, const sf_graph *g, const char *path,
                                       sf_error *err);
/* The same, recording the machine's name in the file's "machine" field (m may be
 * NULL: the field is left out, as the two functions above do). */
SF_API char *sf_strategy_to_json_for(const sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                     sf_error *err);
SF_API sf_status sf_strategy_save_json_for(const sf_strategy *s, const sf_graph *g,
                                           const sf_machine *m, const char *path, sf_error *err);

/* ---- pictures ---------------------------------------------------------- */

/* The graph in Graphviz DOT. labels/colors: optional per-operator extra label
 * line and fill colour ("#aabbcc"), e.g. a parallel config; either may be NULL. */
SF_API char *sf_graph_to_dot(const sf_graph *g, const char *const *labels,
                             const char *const *colors, sf_error *err);
SF_API sf_status sf_graph_write_dot(const sf_graph *g, const char *path, const char *const *labels,
                                    const char *const *colors, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
