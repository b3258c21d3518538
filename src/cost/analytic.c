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
    p->efficiency[SF_OP_GRU] = 0.7;
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

int sf_analytic_eff_class(sf_op_type type) {
    switch (type) {
    case SF_OP_CONV2D: return SF_EFF_CONV;
    case SF_OP_LINEAR:
    case SF_OP_MATMUL: return SF_EFF_GEMM;
    case SF_OP_ATTENTION: return SF_EFF_ATTENTION;
    case SF_OP_LSTM:
    case SF_OP_GRU: return SF_EFF_LSTM; /* the same products: a GRU's are 3 gates wide */
    default: return -1;
    }
}

/* The device's figure for a class in the model's dtype, else the model's own
 * for the operator type. */
static double class_eff(const sf_analytic_params *p, const sf_device_kind *kind, int cls,
                        unsigned type) {
    if (cls >= 0 && cls < SF_EFF_COUNT) {
        double e = kind->efficiency[cls][p->dtype];
        if (e > 0) return e;
    }
    return type < SF_OP_COUNT ? p->efficiency[type] : 0.5;
}

double sf_analytic_efficiency(const sf_analytic_params *p, const sf_device_kind *kind,
                              sf_op_type type) {
    return class_eff(p, kind, sf_analytic_eff_class(type), (unsigned)type);
}

/* The peak an operator of class cls computes at: the dtype's, except that
 * under tf32 only the tensor-core products (conv2d, gemm, attention, lstm) run
 * on tensor cores and everything else at the fp32 rate. A device without the
 * requested dtype runs it at its fp32 peak (the simulator refuses such a plan
 * before it asks: sf_machine_check_dtype). */
static double peak_for(const sf_analytic_params *p, const sf_device_kind *kind, int cls) {
    double peak = kind->peak_flops[p->dtype];
    if (p->dtype == SF_DTYPE_TF32 && cls < 0) peak = kind->peak_flops[SF_DTYPE_FP32];
    if (!(peak > 0)) peak = kind->peak_flops[SF_DTYPE_FP32];
    return peak;
}

static double launch_of(const sf_analytic_params *p, const sf_device_kind *kind) {
    return kind->launch_s > 0 ? kind->launch_s : p->launch_s;
}

static double bw_of(const sf_analytic_params *p, const sf_device_kind *kind) {
    double me = kind->mem_efficiency > 0 ? kind->mem_efficiency : p->mem_efficiency;
    return kind->mem_bw_Bps * me;
}

/* FLOPs the library's algorithm does per direct-count FLOP: the device's ratio
 * for a 3x3, stride-1, undilated, ungrouped convolution (Winograd), else 1. */
static double conv_flop_ratio(const sf_analytic_params *p, const sf_device_kind *kind,
                              const sf_op *op) {
    if (op->type != SF_OP_CONV2D) return 1;
    double r = kind->conv3x3_flop_ratio[p->dtype];
    if (!(r > 0)) return 1;
    const sf_conv2d_params *c = &op->params.conv2d;
    if (c->kernel[0] != 3 || c->kernel[1] != 3 || c->stride[0] != 1 || c->stride[1] != 1 ||
        c->dilation[0] > 1 || c->dilation[1] > 1 || c->groups > 1)
        return 1;
    return r;
}

/* One kernel: launch + max(compute, memory); bytes in the model's dtype. */
static double kernel_s(double launch, double flops, double peak_eff, double bytes, double bw) {
    double compute = flops > 0 && peak_eff > 0 ? flops / peak_eff : 0;
    double memory = bytes > 0 ? bytes / bw : 0;
    return launch + (compute > memory ? compute : memory);
}

/* The roofline of one pass from its FLOPs and bytes. */
static double roofline_s(const sf_analytic_params *p, const sf_op *op, const sf_device_kind *kind,
                         double flops, double bytes) {
    unsigned type = (unsigned)op->type;
    int cls = sf_analytic_eff_class(op->type);
    double eff = class_eff(p, kind, cls, type);
    flops *= conv_flop_ratio(p, kind, op);
    /* the operator counts fp32 elements; the scale is exactly 1 in fp32 */
    bytes *= (double)sf_dtype_bytes(p->dtype) / SF_ELEM_BYTES;
    return kernel_s(launch_of(p, kind), flops, peak_for(p, kind, cls) * eff, bytes, bw_of(p, kind));
}

/*
 * An LSTM tile step by step (devices with rnn_per_step; docs/cost-model.md,
 * "Recurrent operators step by step"), as cuDNN runs a layer: the input
 * projection x W_ih of all steps is one product, then each step is a
 * recurrent product h W_hh (small: n x H by H x 4h, latency- and
 * weight-read-bound) and a fused gate kernel, one after the other. Backward
 * walks the steps back (the gates' backward and dh = dgates W_hh^T each step)
 * and then does the products batched over the steps: dx, dW_ih, dW_hh. The
 * FLOPs add up to the operator's (2 n 4h (I + H) per step forward, twice that
 * backward, plus its elementwise work); the bytes are counted here per kernel.
 * A GRU tile is priced the same way with its 3 gate blocks instead of 4 (its
 * cell reads the input and the recurrent projections apart: r multiplies W_hn h).
 */
#define LSTM_GATE_FWD_ELEMS 15.0 /* per unit per step: 2 x 4 pre-activations, c, c', h', 4 saved   \
                                  */
#define LSTM_GATE_BWD_ELEMS 12.0 /* saved gates 4, c 2, dh, dc 2, dgates 4 written */
#define GRU_GATE_FWD_ELEMS 13.0  /* 2 x 3 pre-activations, h, h', 3 saved gates and W_hn h */
#define GRU_GATE_BWD_ELEMS 13.0  /* saved 4, h, dh in and out, dgates 2 x 3 written */

static void rnn_steps_s(const sf_analytic_params *p, const sf_op *op, const sf_tile *t,
                        const sf_device_kind *kind, double *fwd_s, double *bwd_s) {
    double n = (double)(t->hi[0] - t->lo[0]), steps = (double)(t->hi[1] - t->lo[1]);
    double h = (double)(t->hi[2] - t->lo[2]);
    int gru = op->type == SF_OP_GRU;
    double in = (double)op->in_shapes[0].d[2];
    double hid = (double)(gru ? op->params.gru.hidden : op->params.lstm.hidden);
    double gates = gru ? 3 : 4; /* blocks of gate rows */
    double fwd_elems = gru ? GRU_GATE_FWD_ELEMS : LSTM_GATE_FWD_ELEMS;
    double bwd_elems = gru ? GRU_GATE_BWD_ELEMS : LSTM_GATE_BWD_ELEMS;
    double eb = sf_dtype_bytes(p->dtype), bw = bw_of(p, kind), launch = launch_of(p, kind);
    sf_op_cost c;
    memset(&c, 0, sizeof c);
    sf_op_tile_cost(op, t, &c);
    double gemm_fwd = 2 * n * gates * h * (in + hid) * steps;
    double ew_fwd = c.flops_fwd > gemm_fwd ? c.flops_fwd - gemm_fwd : 0;
    double ew_bwd = c.flops_bwd > 2 * gemm_fwd ? c.flops_bwd - 2 * gemm_fwd : 0;
    double pk = peak_for(p, kind, SF_EFF_LSTM), pk_ew = peak_for(p, kind, -1);
    double big = pk * class_eff(p, kind, SF_EFF_LSTM, (unsigned)op->type);
    double small = pk * class_eff(p, kind, SF_EFF_LSTM_STEP, (unsigned)op->type);
    double ew_rate = pk_ew * (SF_OP_ADD < SF_OP_COUNT ? p->efficiency[SF_OP_ADD] : 0.5);

    /* forward */
    double proj = kernel_s(launch, 2 * n * steps * gates * h * in, big,
                           (n * steps * in + gates * h * in + n * steps * gates * h) * eb, bw);
    double rec = kernel_s(launch, 2 * n * gates * h * hid, small,
                          (n * hid + gates * h * hid + n * gates * h) * eb, bw);
    double gate =
        kernel_s(launch, ew_fwd / (steps > 0 ? steps : 1), ew_rate, fwd_elems * n * h * eb, bw);
    *fwd_s = proj + steps * (rec + gate);

    /* backward: per step, the gates' backward and the recurrent dgrad */
    double gate_b =
        kernel_s(launch, ew_bwd / (steps > 0 ? steps : 1), ew_rate, bwd_elems * n * h * eb, bw);
    double rec_b = kernel_s(launch, 2 * n * gates * h * hid, small,
                            (n * gates * h + gates * h * hid + n * hid) * eb, bw);
    /* then batched over the steps: dx = dgates W_ih, dW_ih = dgates^T x, dW_hh = dgates^T h */
    double dx = kernel_s(launch, 2 * n * steps * gates * h * in, big,
                         (n * steps * gates * h + gates * h * in + n * steps * in) * eb, bw);
    double dw = kernel_s(
        launch, 2 * n * steps * gates * h * (in + hid), big,
        (n * steps * gates * h + n * steps * (in + hid) + gates * h * (in + hid)) * eb, bw);
    *bwd_s = steps * (gate_b + rec_b) + dx + dw;
}

static int per_step(const sf_op *op, const sf_device_kind *kind) {
    return (op->type == SF_OP_LSTM || op->type == SF_OP_GRU) && kind->rnn_per_step;
}

static double analytic_task_s(void *self, const sf_op *op, const sf_tile *t,
                              const sf_device_kind *kind, sf_pass pass) {
    const sf_analytic_params *p = self;
    if (sf_tile_empty(t)) return 0;
    if (pass == SF_PASS_UPDATE) {
        int64_t w = sf_op_tile_weights(op, t);
        if (w <= 0) return 0;
        /* the optimizer's math runs on the fp32 masters: the fp32 peak */
        double peak = kind->peak_flops[SF_DTYPE_FP32] * UPDATE_EFFICIENCY;
        double memory =
            (double)w * sf_optimizer_update_bytes(p->optimizer, p->dtype) / bw_of(p, kind);
        double compute = peak > 0 ? (double)w * sf_optimizer_update_flops(p->optimizer) / peak : 0;
        return launch_of(p, kind) + (compute > memory ? compute : memory);
    }
    if (per_step(op, kind)) {
        double f, b;
        rnn_steps_s(p, op, t, kind, &f, &b);
        return pass == SF_PASS_BWD ? b : f;
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
    if (per_step(op, kind)) {
        rnn_steps_s(p, op, t, kind, fwd_s, bwd_s);
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
