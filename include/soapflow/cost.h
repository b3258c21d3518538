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

/* The interface: one callback for the time of a task, plus a destructor. */
typedef struct sf_cost_model_vtable {
    const char *name; /* "analytic", "profiled" */
    double (*task_s)(void *self, const sf_op *op, const sf_tile *t, const sf_device_kind *kind,
                     sf_pass pass);
    void (*free)(void *self);
} sf_cost_model_vtable;

typedef struct sf_cost_model {
    const sf_cost_model_vtable *vt;
    void *self;
    const sf_machine *machine;
} sf_cost_model;

/* Parameters of the analytic model; see docs/cost-model.md for sources. */
typedef struct sf_analytic_params {
    double launch_s;                  /* per-task overhead (kernel launch + framework) */
    double efficiency[SF_OP_COUNT];   /* fraction of peak FLOP/s each operator reaches */
    double mem_efficiency;            /* fraction of peak memory bandwidth reached */
    sf_dtype dtype;                   /* which peak to use */
} sf_analytic_params;

void sf_analytic_params_default(sf_analytic_params *p);
/* params NULL: defaults. */
sf_cost_model *sf_cost_analytic_new(const sf_machine *m, const sf_analytic_params *p);
void sf_cost_free(sf_cost_model *cm);
const char *sf_cost_name(const sf_cost_model *cm);

/* Time in seconds of the task that runs tile `t` of `op` on `device`. */
double sf_cost_task_s(const sf_cost_model *cm, const sf_op *op, const sf_tile *t, int device,
                      sf_pass pass);

#ifdef __cplusplus
}
#endif
#endif
