/*
 * analytic.c - the roofline cost model behind cost.h's table of callbacks.
 *
 * A task's time is a fixed overhead plus the longer of its compute and its
 * memory traffic, each at an achievable fraction of the device's peak:
 *
 *     fwd/bwd:  launch_s + max(flops / (peak[dtype] * efficiency[op type]),
 *                              bytes / (mem_bw * mem_efficiency))
 *     update:   launch_s + max(w * update_flops / (peak[fp32] * 0.5),
 *                              w * update_bytes / (mem_bw * mem_efficiency))
 *
 * with flops and bytes from sf_op_tile_cost and w the weight elements of the
 * tile's shard (sf_op_tile_weights). The update is the optimizer's loop
 * (optimizer.c: sf_optimizer_update_bytes and _flops): SGD with momentum reads
 * the weight, its gradient and the momentum and writes the momentum and the
 * weight, and zeroes the gradient for the next step (soapflow's runtime does
 * it in the same loop; a framework's zero_grad is the same store): six 4-byte
 * accesses per element in fp32; Adam has a second state, eight. A few FLOPs
 * each (6 and 15), so the memory term decides on every device: the compute
 * term is there so that the price holds the loop's whole description. An
 * empty tile, or an update of a tile without weights, is no task: 0 s.
 *
 * Precision (dtype, docs/cost-model.md): flops run at peak[dtype]; the bytes
 * of sf_op_tile_cost, which an operator counts in fp32 elements (SF_ELEM_BYTES:
 * its activations and the weights it reads), are scaled to the dtype's element
 * size, as a mixed-precision kernel reads and writes 16-bit activations and
 * the 16-bit compute copy of the weights. The update of mixed precision reads
 * and writes the fp32 master and momentum (16 bytes), reads and zeroes the
 * 16-bit gradient and writes the new 16-bit compute copy (3 x 2 bytes): 22
 * bytes an element, against fp32's 24 (Adam: 30 and 32).
 *
 * A roofline (Williams, Waterman, Patterson, CACM 2009) with a fixed per-task
 * overhead plans clusters one does not own from data-sheet figures alone; it
 * cannot see cuDNN's algorithm choices or cache effects, which is what the
 * per-operator efficiencies absorb and what the profiled model measures.
 * Rejected: a per-operator lookup of measured efficiencies by tile shape here;
 * that is the profiled model's job, and this one stays a closed formula.
 * Default figures and their sources are listed below and in docs/cost-model.md.
 *
 * task_s allocates nothing and touches only the operator, the tile and the
 * parameters: the simulator calls it once per task of every simulated strategy.
 */
#include "soapflow/cost.h"

#include <stdlib.h>
#include <string.h>

/* The efficiency the update's FLOPs reach: an elementwise loop's, as every
 * operator without a table entry of its own (its memory term decides anyway). */
#define UPDATE_EFFICIENCY 0.5

/*
 * Defaults (docs/cost-model.md has the longer argument):
 *
 *  launch 5 us: a CUDA kernel launch and the ramp-up and tail of a small
 *    kernel, commonly measured at 3-10 us on Pascal to Hopper GPUs. Host-side
 *    dispatch (PyTorch eager; Legion's task launch in FlexFlow, tens of us) is
 *    larger but overlaps device work while the stream stays full, and
 *    FlexFlow's simulator likewise used task times measured on the device.
 *  conv2d 0.6: cuDNN reaches 50-70% of fp32 peak on the large convolutions of
 *    CNNs (Chetlur et al., "cuDNN", 2014; Baidu DeepBench results); smaller
 *    layers less, which the per-task launch partly models.
 *  linear, matmul, lstm, attention 0.7: cuBLAS SGEMM reaches 75-90% of peak
 *    on large square products; the skinny products of LSTM gates and
 *    per-head attention reach less, hence a middle value.
 *  everything else 0.5: pools, norms, activations, elementwise, softmax,
 *    copies and embedding gathers do a few FLOPs per byte, far below any
 *    device's FLOP-to-byte ratio, so their time is set by the memory term and
 *    this value only matters if an operator ever reports unusual FLOPs.
 *  mem_efficiency 0.8: STREAM-like kernels (BabelStream, Deakin et al.) reach
 *    roughly 75-90% of the data-sheet bandwidth on P100, V100, A100 and H100.
 *  dtype fp32: the papers trained in fp32, and every preset has an fp32 peak
 *    (bf16 and fp16 are the CLI's --dtype; docs/cost-model.md, "Precision").
 */
void sf_analytic_params_default(sf_analytic_params *p) {
    memset(p, 0, sizeof *p);
    p->launch_s = 5e-6;
    for (int i = 0; i < SF_OP_COUNT; i++) p->efficiency[i] = 0.5;
    p->efficiency[SF_OP_CONV2D] = 0.6;
    p->efficiency[SF_OP_LINEAR] = 0.7;
    p->efficiency[SF_OP_MATMUL] = 0.7;
    p->efficiency[SF_OP_LSTM] = 0.7;
    p->efficiency[SF_OP_ATTENTION] = 0.7;
    p->mem_efficiency = 0.8;
    p->dtype = SF_DTYPE_FP32;
}

static int params_ok(const sf_analytic_params *p) {
    if (!(p->launch_s >= 0)) return 0;
    if (!(p->mem_efficiency > 0 && p->mem_efficiency <= 1)) return 0;
    if ((unsigned)p->dtype >= SF_DTYPE_COUNT) return 0;
    if ((unsigned)p->optimizer >= SF_OPTIMIZER_COUNT) return 0;
    for (int i = 0; i < SF_OP_COUNT; i++)
        if (!(p->efficiency[i] > 0 && p->efficiency[i] <= 1)) return 0;
    return 1;
}

/* The roofline of one pass from its FLOPs and bytes. */
static double roofline_s(const sf_analytic_params *p, const sf_op *op, const sf_device_kind *kind,
                         double flops, double bytes) {
    double bw = kind->mem_bw_Bps * p->mem_efficiency;
    /* A device without the requested dtype runs it at its fp32 peak (the
     * simulator refuses such a plan before it asks: sf_machine_check_dtype). */
    double peak = kind->peak_flops[p->dtype];
    if (!(peak > 0)) peak = kind->peak_flops[SF_DTYPE_FP32];
    unsigned type = (unsigned)op->type;
    double eff = type < SF_OP_COUNT ? p->efficiency[type] : 0.5;
    double compute = flops > 0 && peak > 0 ? flops / (peak * eff) : 0;
    /* the operator counts fp32 elements; the scale is exactly 1 in fp32 */
    bytes *= (double)sf_dtype_bytes(p->dtype) / SF_ELEM_BYTES;
    double memory = bytes > 0 ? bytes / bw : 0;
    return p->launch_s + (compute > memory ? compute : memory);
}

static double analytic_task_s(void *self, const sf_op *op, const sf_tile *t,
                              const sf_device_kind *kind, sf_pass pass) {
    const sf_analytic_params *p = self;
    if (sf_tile_empty(t)) return 0;
    if (pass == SF_PASS_UPDATE) {
        double bw = kind->mem_bw_Bps * p->mem_efficiency;
        int64_t w = sf_op_tile_weights(op, t);
        if (w <= 0) return 0;
        /* the optimizer's math runs on the fp32 masters: the fp32 peak */
        double peak = kind->peak_flops[SF_DTYPE_FP32] * UPDATE_EFFICIENCY;
        double memory = (double)w * sf_optimizer_update_bytes(p->optimizer, p->dtype) / bw;
        double compute = peak > 0 ? (double)w * sf_optimizer_update_flops(p->optimizer) / peak : 0;
        return p->launch_s + (compute > memory ? compute : memory);
    }
    sf_op_cost c;
    sf_op_tile_cost(op, t, &c);
    if (pass == SF_PASS_BWD) return roofline_s(p, op, kind, c.flops_bwd, c.bytes_bwd);
    return roofline_s(p, op, kind, c.flops_fwd, c.bytes_fwd);
}

/* Both passes from one sf_op_tile_cost: the simulator asks for both of every
 * part, and the operator's cost callback (regions, output pieces, weights) is
 * most of a task's price. */
static void analytic_task_fwd_bwd_s(void *self, const sf_op *op, const sf_tile *t,
                                    const sf_device_kind *kind, double *fwd_s, double *bwd_s) {
    const sf_analytic_params *p = self;
    if (sf_tile_empty(t)) {
        *fwd_s = *bwd_s = 0;
        return;
    }
    sf_op_cost c;
    sf_op_tile_cost(op, t, &c);
    *fwd_s = roofline_s(p, op, kind, c.flops_fwd, c.bytes_fwd);
    *bwd_s = roofline_s(p, op, kind, c.flops_bwd, c.bytes_bwd);
}

static void analytic_free(void *self) { free(self); }

static const sf_cost_model_vtable analytic_vt = {
    .name = "analytic",
    .task_s = analytic_task_s,
    .free = analytic_free,
    .task_fwd_bwd_s = analytic_task_fwd_bwd_s,
};

sf_cost_model *sf_cost_analytic_new(const sf_machine *m, const sf_analytic_params *p) {
    sf_analytic_params def;
    if (!p) {
        sf_analytic_params_default(&def);
        p = &def;
    }
    if (!m || !params_ok(p)) return NULL;
    sf_cost_model *cm = calloc(1, sizeof *cm);
    sf_analytic_params *self = malloc(sizeof *self);
    if (!cm || !self) {
        free(cm);
        free(self);
        return NULL;
    }
    *self = *p;
    cm->vt = &analytic_vt;
    cm->self = self;
    cm->machine = m;
    cm->dtype = p->dtype;
    cm->optimizer = p->optimizer;
    return cm;
}
