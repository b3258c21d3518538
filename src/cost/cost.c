/*
 * cost.c - the dispatch every cost model shares: the simulator and the searches
 * call sf_cost_task_s and never know which model answers (the analytic
 * roofline in analytic.c, or a profiled model). The device's kind is looked up
 * here, so a model sees only the figures of the device, never the machine.
 */
#include "soapflow/cost.h"

#include <stdlib.h>

void sf_cost_free(sf_cost_model *cm) {
    if (!cm) return;
    if (cm->vt && cm->vt->free) cm->vt->free(cm->self);
    free(cm);
}

const char *sf_cost_name(const sf_cost_model *cm) {
    return cm && cm->vt && cm->vt->name ? cm->vt->name : "?";
}

double sf_cost_task_s(const sf_cost_model *cm, const sf_op *op, const sf_tile *t, int device,
                      sf_pass pass) {
    return cm->vt->task_s(cm->self, op, t, sf_machine_device_kind(cm->machine, device), pass);
}

void sf_cost_task_fwd_bwd_s(const sf_cost_model *cm, const sf_op *op, const sf_tile *t, int device,
                            double *fwd_s, double *bwd_s) {
    const sf_device_kind *kind = sf_machine_device_kind(cm->machine, device);
    if (cm->vt->task_fwd_bwd_s) {
        cm->vt->task_fwd_bwd_s(cm->self, op, t, kind, fwd_s, bwd_s);
        return;
    }
    *fwd_s = cm->vt->task_s(cm->self, op, t, kind, SF_PASS_FWD);
    *bwd_s = cm->vt->task_s(cm->self, op, t, kind, SF_PASS_BWD);
}

sf_dtype sf_cost_dtype(const sf_cost_model *cm) { return cm ? cm->dtype : SF_DTYPE_FP32; }

sf_optimizer_kind sf_cost_optimizer(const sf_cost_model *cm) {
    return cm ? cm->optimizer : SF_OPTIMIZER_SGD;
}

int sf_cost_elem_bytes(const sf_cost_model *cm) {
    int b = sf_dtype_bytes(sf_cost_dtype(cm));
    return b > 0 ? b : SF_ELEM_BYTES;
}
