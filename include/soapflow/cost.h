/*
 * soapflow/cost.h - how long one task takes: the narrow interface between the
 * simulator (and searches) and a cost model.
 *
 *     sf_cost_model *cm = sf_cost_analytic_new(m, NULL);    // roofline model
 *     double t = sf_cost_task_s(cm, op, &tile, device, SF_PASS_FWD);
 *     sf_cost_free(cm);
 *
 * Two kinds plug in behind the same table of callbacks (as ASTRA-sim's compute
 * and network models do): the analytic roofline, which plans clusters one does
 * not own, and the profiled model (measured on the real device and cached by
 * operator parameters, tile shape and device kind), which falls back to the
 * analytic model for what was not measured.
 */
#ifndef SOAPFLOW_COST_H
#define SOAPFLOW_COST_H

#include <stdio.h>

#include "soapflow/graph.h"
#include "soapflow/machine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sf_pass {
    SF_PASS_FWD = 0,
    SF_PASS_BWD = 1,
    SF_PASS_UPDATE = 2 /* optimizer step over the tile's weight shard */
} sf_pass;

/* ---- the optimizer -------------------------------------------------------
 *
 * What updates the weights after each step: the same descriptor prices the
 * update (its state's bytes per weight, the FLOPs and bytes of its loop; the
 * cost model carries the kind, as it carries the dtype, so that everything
 * that prices a plan sees one optimizer) and runs it (the runtime steps every
 * shard it updates with sf_optimizer_step). PyTorch's formulas
 * (torch.optim.SGD, Adam, AdamW; docs/runtime.md, "Optimizers"):
 *
 *   sgd:   g += wd w;  v = mu v + g;  w -= lr v
 *   adam:  g += wd w (L2 in the gradient);  m = b1 m + (1 - b1) g;
 *          v = b2 v + (1 - b2) g^2;
 *          w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   adamw: w *= 1 - lr wd (decoupled decay), then adam's step without the L2
 *
 * with t the step count from 1 (bias correction): a resumed run must carry
 * it, and the checkpoint does (docs/formats-checkpoint.md). */
typedef enum sf_optimizer_kind {
    SF_OPTIMIZER_SGD = 0, /* with momentum (one state: the momentum buffer) */
    SF_OPTIMIZER_ADAM,    /* two states: exp_avg (m) and exp_avg_sq (v) */
    SF_OPTIMIZER_ADAMW,
    SF_OPTIMIZER_COUNT
} sf_optimizer_kind;

typedef struct sf_optimizer {
    sf_optimizer_kind kind;
    double lr;           /* learning rate */
    double momentum;     /* sgd: mu */
    double beta1, beta2; /* adam, adamw: the moments' decay rates */
    double eps;          /* adam, adamw: added to the denominator */
    double weight_decay; /* sgd, adam: L2 added to the gradient; adamw: decoupled */
} sf_optimizer;

/* The defaults of kind: sgd lr 0.01 and momentum 0.9 (soapflow's SGD as it
 * always was), adam and adamw PyTorch's: lr 0.001, betas 0.9 and 0.999, eps
 * 1e-8; weight decay 0, adamw's 0.01 (PyTorch's). */
SF_API void sf_optimizer_default(sf_optimizer *o, sf_optimizer_kind kind);
SF_API const char *sf_optimizer_name(sf_optimizer_kind k); /* "sgd", "adam", "adamw" */
/* Parse an optimizer name; -1 when unknown. */
SF_API int sf_optimizer_parse(const char *name, sf_optimizer_kind *out);
/* The fp32 state tensors the optimizer keeps per weight: sgd 1 (momentum),
 * adam and adamw 2 (m and v). Their bytes per weight are 4 times this; under
 * mixed precision the fp32 master (4 more) comes with them (docs/cost-model.md). */
SF_API int sf_optimizer_state_slots(sf_optimizer_kind k);
/* Device-memory bytes the update moves per weight element in a dtype: the fp32
 * master weight and each state read and written, the gradient (in the dtype)
 * read and zeroed, and under mixed precision the 16-bit compute copy written:
 * sgd 24 in fp32, 22 in bf16/fp16; adam(w) 32 and 30. */
SF_API double sf_optimizer_update_bytes(sf_optimizer_kind k, sf_dtype t);
/* Floating-point operations of the update per weight element, in fp32 (the
 * master's), weight decay included: sgd 6, adam 15, adamw 14 (a square root
 * and a division counted as one each). */
SF_API double sf_optimizer_update_flops(sf_optimizer_kind k);
/* One update of n contiguous elements at step t (t >= 1: steps taken so far,
 * this one included): w, g, s0 (sgd's momentum, adam's m) and s1 (adam's v;
 * unused by sgd, may be NULL) in fp32. Zeroes g, which the runtime's next
 * backward pass accumulates into. */
SF_API void sf_optimizer_step(const sf_optimizer *o, int64_t t, float *w, float *g, float *s0,
                              float *s1, int64_t n);

/* The interface: one callback for the time of a task, plus a destructor, and
 * optionally both passes of a tile at once. */
typedef struct sf_cost_model_vtable {
    const char *name; /* "analytic", "profiled" */
    double (*task_s)(void *self, const sf_op *op, const sf_tile *t, const sf_device_kind *kind,
                     sf_pass pass);
    void (*free)(void *self);
    /* NULL, or the forward and backward times of a tile in one call, equal bit
     * for bit to task_s's for SF_PASS_FWD and SF_PASS_BWD: a model that derives
     * both from the same per-tile figures (the analytic one's sf_op_tile_cost)
     * then works them out once, which the simulator's full runs feel. */
    void (*task_fwd_bwd_s)(void *self, const sf_op *op, const sf_tile *t,
                           const sf_device_kind *kind, double *fwd_s, double *bwd_s);
} sf_cost_model_vtable;

typedef struct sf_cost_model {
    const sf_cost_model_vtable *vt;
    void *self;
    const sf_machine *machine;
    /* The precision the plan trains in (docs/cost-model.md, "Precision"): the
     * peak the tasks compute at, and the element size of what the simulator
     * and OptCNN move and keep (activations, their transfers, gradients and
     * their syncs, compute copies of the weights; weights keep fp32 masters).
     * 0, fp32, for a model made by hand with calloc. */
    sf_dtype dtype;
    /* The optimizer the plan trains with: the update's price and the state's
     * bytes (the simulator's memory, OptCNN's). 0, sgd, for a model made by hand. */
    sf_optimizer_kind optimizer;
} sf_cost_model;

/* The model's dtype (fp32 for NULL). */
SF_API sf_dtype sf_cost_dtype(const sf_cost_model *cm);
/* The model's optimizer (sgd for NULL). */
SF_API sf_optimizer_kind sf_cost_optimizer(const sf_cost_model *cm);
/* Bytes of one element of an activation, a gradient or a compute copy of the
 * weights under cm's dtype: sf_dtype_bytes(sf_cost_dtype(cm)), 4 for fp32. */
SF_API int sf_cost_elem_bytes(const sf_cost_model *cm);

/* Parameters of the analytic model; see docs/cost-model.md for sources. */
typedef struct sf_analytic_params {
    double launch_s;                /* per-task overhead (kernel launch + framework) */
    double efficiency[SF_OP_COUNT]; /* fraction of peak FLOP/s each operator reaches */
    double mem_efficiency;          /* fraction of peak memory bandwidth reached */
    sf_dtype dtype;                 /* the peak to use, and the model's dtype: memory-bound
                                     * bytes count its element size (default fp32) */
    sf_optimizer_kind optimizer;    /* the update's loop and the model's optimizer (default sgd) */
} sf_analytic_params;

SF_API void sf_analytic_params_default(sf_analytic_params *p);
/* The sf_eff_class of an operator type (conv2d, gemm for linear and matmul,
 * attention, lstm), or -1 for the memory-bound rest. */
SF_API int sf_analytic_eff_class(sf_op_type type);
/* The fraction of peak an operator of `type` reaches on `kind` under p's dtype:
 * the device's figure for its class and dtype (sf_device_kind.efficiency) when
 * not 0, else p->efficiency[type]. */
SF_API double sf_analytic_efficiency(const sf_analytic_params *p, const sf_device_kind *kind,
                                     sf_op_type type);
/* params NULL: defaults. */
SF_API sf_cost_model *sf_cost_analytic_new(const sf_machine *m, const sf_analytic_params *p);
SF_API void sf_cost_free(sf_cost_model *cm);
SF_API const char *sf_cost_name(const sf_cost_model *cm);

/* Time in seconds of the task that runs tile `t` of `op` on `device`. */
SF_API double sf_cost_task_s(const sf_cost_model *cm, const sf_op *op, const sf_tile *t, int device,
                             sf_pass pass);
/* Both passes of that tile: the same two figures as sf_cost_task_s, in one call. */
SF_API void sf_cost_task_fwd_bwd_s(const sf_cost_model *cm, const sf_op *op, const sf_tile *t,
                                   int device, double *fwd_s, double *bwd_s);

/* ---- the profiled model ------------------------------------------------
 *
 * A profile database maps a *key* (what determines a task's run time on one
 * kind of device: the operator type, its parameters, the extents of the tile
 * and of the input regions the tile reads) to the measured median forward and
 * backward times. It holds the measurements of one device kind. The file
 * format is docs/formats-costs.md:
 *
 *     sf_profile_db *db = sf_profile_db_load_json("costs.json", &err);
 *     sf_cost_model *cm = sf_cost_profiled_new(m, db, sf_cost_analytic_new(m, NULL));
 *     ... simulate with cm ...
 *     char buf[256];
 *     if (sf_cost_profiled_misses(cm, buf, sizeof buf) > 0) warn("not measured: %s", buf);
 *     sf_cost_free(cm);                     // frees db and the fallback too
 *
 * Keys read like
 *     conv2d|out_channels=16,kernel=5x5,stride=1x1,padding=0x0,dilation=1x1,groups=1,bias=1
 *         |tile=32x16x10x10|in=32x6x14x14
 * (one line): tiles that differ only in position but read regions of the same
 * extents share a key; a tile at a border of a split image has a clipped halo
 * and so a key of its own. The global batch never enters a key, only extents. */

#define SF_PROFILE_KEY_MAX 2048 /* longest key, NUL included */
/* Longest task time a database holds, seconds (31 years): far beyond any
 * measurement, low enough that the simulator's sums of task times stay finite
 * (1e308 s read from a file made the iteration time infinite). */
#define SF_PROFILE_TIME_MAX_S 1e9

typedef struct sf_profile_entry {
    const char *key; /* owned by the database */
    sf_op_type op;
    double fwd_s; /* median forward time, seconds */
    double bwd_s; /* median backward time, seconds */
    int reps;     /* timed repetitions behind the medians */
} sf_profile_entry;

typedef struct sf_profile_db sf_profile_db;

/* The key of tile t of op, written into buf (n >= SF_PROFILE_KEY_MAX is always
 * enough). Returns buf, or NULL when it does not fit in n bytes. */
SF_API char *sf_profile_key(const sf_op *op, const sf_tile *t, char *buf, size_t n);

/* device_kind: the sf_device_kind name the times were measured on ("" or NULL:
 * not yet known; set by the first sf_profile_model). NULL when out of memory. */
SF_API sf_profile_db *sf_profile_db_new(const char *device_kind);
SF_API void sf_profile_db_free(sf_profile_db *db);
SF_API const char *sf_profile_db_device_kind(const sf_profile_db *db);
SF_API sf_status sf_profile_db_set_device_kind(sf_profile_db *db, const char *name, sf_error *err);
SF_API int sf_profile_db_count(const sf_profile_db *db);
/* Entry i (0 <= i < count), in insertion order (a file's entries in file order). */
SF_API const sf_profile_entry *sf_profile_db_entry(const sf_profile_db *db, int i);
/* The entry of key, or NULL. */
SF_API const sf_profile_entry *sf_profile_db_lookup(const sf_profile_db *db, const char *key);
/* Add an entry, or replace the times of an existing key. Times from 0 to
 * SF_PROFILE_TIME_MAX_S, reps >= 1, key non-empty and shorter than SF_PROFILE_KEY_MAX. */
SF_API sf_status sf_profile_db_insert(sf_profile_db *db, const char *key, sf_op_type op,
                                      double fwd_s, double bwd_s, int reps, sf_error *err);

/* JSON (docs/formats-costs.md). Reading is strict (unknown or duplicate keys,
 * bad numbers are errors naming the file and field); writing is atomic, with
 * entries sorted by key and each number in the fewest digits that read back. */
SF_API sf_profile_db *sf_profile_db_parse_json(const char *text, const char *origin, sf_error *err);
SF_API sf_profile_db *sf_profile_db_load_json(const char *path, sf_error *err);
SF_API char *sf_profile_db_to_json(const sf_profile_db *db, sf_error *err); /* malloc'd */
SF_API sf_status sf_profile_db_save_json(const sf_profile_db *db, const char *path, sf_error *err);

/* A cost model that answers forward and backward tasks from db and everything
 * else from fallback: keys not in db, devices of another kind than db's, and
 * every update task (the update is a bandwidth-bound loop that the analytic
 * model already times well; see docs/cost-model.md). Input operators have no
 * kernel and are not counted as misses. Takes ownership of db and fallback,
 * also when it fails (NULL: out of memory, a NULL argument, or a fallback whose
 * dtype is not fp32: the database holds measurements of soapflow's kernels,
 * which run in fp32, so a plan in another dtype cannot use them). */
SF_API sf_cost_model *sf_cost_profiled_new(const sf_machine *m, sf_profile_db *db,
                                           sf_cost_model *fallback);
/* The database of a profiled model, or NULL when cm is another kind of model. */
SF_API const sf_profile_db *sf_cost_profiled_db(const sf_cost_model *cm);

/* What the profiled model could not answer from its database, so that a
 * command can say which results rest on the analytic model. Counts are of
 * task_s calls (forward and backward), not of distinct keys. Not thread-safe:
 * one model per thread. */
typedef struct sf_profile_stats {
    int64_t hits, misses;
    int64_t misses_by_type[SF_OP_COUNT];
} sf_profile_stats;

/* SF_ERR_INVALID when cm is not a profiled model. */
SF_API sf_status sf_cost_profiled_stats(const sf_cost_model *cm, sf_profile_stats *out);
SF_API void sf_cost_profiled_reset_stats(sf_cost_model *cm);
/* "lstm (12 tasks), attention (4 tasks)" into buf (truncated to n); returns the
 * number of operator types that missed (0 for any other kind of model). */
SF_API int sf_cost_profiled_misses(const sf_cost_model *cm, char *buf, size_t n);

/* ---- the profiler --------------------------------------------------------
 *
 * Measures, with the real fast CPU kernels on this machine, every distinct key
 * the search space of g on m can produce: for each operator, every tuple of
 * degrees over its splittable dimensions whose product is at most max_devices
 * (and SF_MAX_PARTS), and every part of each such config. Keys already in db
 * are reused, not measured again, so a second run over the same model costs
 * only the enumeration. Operators without a fast kernel are skipped and
 * counted by type in the report. The measurement runs on one thread: it sets
 * OpenBLAS to one thread for the rest of the process (openblas_set_num_threads),
 * as one device of a CPU machine is one single-threaded rank. */
typedef struct sf_profile_options {
    int reps;         /* timed runs per key, >= 1 (default 10) */
    int warmup;       /* untimed runs before them, >= 0 (default 2) */
    int max_devices;  /* cap on parts of a config; 0: the machine's devices */
    double max_bytes; /* skip keys whose buffers need more; 0: the device memory */
    FILE *progress;   /* progress bar (drawn only on a terminal), or NULL */
    uint64_t seed;    /* for the random contents of the buffers */
    /* Called after each new entry is in db, with the entries measured so far in
     * this run: where a caller saves the file as it goes (`soapflow profile`
     * writes it every few seconds, so that an interrupted run keeps what it
     * measured) or stops the run. A status other than SF_OK ends the run with
     * it, the entries so far staying in db. NULL: none. */
    sf_status (*on_entry)(sf_profile_db *db, int measured, void *arg, sf_error *err);
    void *on_entry_arg;
} sf_profile_options;

SF_API void sf_profile_options_default(sf_profile_options *o);

typedef struct sf_profile_report {
    int keys;      /* distinct keys of the search space (input operators aside) */
    int measured;  /* new entries */
    int reused;    /* already in db */
    int skipped;   /* not measured: no kernel, too large, or a kernel error */
    int too_large; /* of skipped: over max_bytes */
    int failed;    /* of skipped: the kernel returned another error */
    int skipped_by_type[SF_OP_COUNT]; /* keys skipped for want of a fast kernel (for
                                       * the type, or SF_ERR_UNSUPPORTED for the tile) */
    double seconds;                   /* wall time of the whole run */
    char first_failure[256];          /* the first kernel error, or "" */
} sf_profile_report;

/* db's device kind must be unset or equal to m's (device 0's) kind: SF_ERR_INVALID
 * otherwise. On an error the entries measured so far stay in db. */
SF_API sf_status sf_profile_model(const sf_graph *g, const sf_machine *m, sf_profile_db *db,
                                  const sf_profile_options *o, sf_profile_report *r, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
