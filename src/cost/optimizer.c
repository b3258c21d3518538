/*
 * optimizer.c - the optimizers a plan trains with (cost.h, "the optimizer"):
 * what the cost model and the simulator price (state bytes per weight, the
 * update's bytes and FLOPs) and the update loop the runtime runs, in one file
 * so that the price and the run describe the same loop.
 *
 * The formulas are PyTorch's single-tensor ones (torch.optim.SGD, Adam, AdamW
 * with foreach=False, maximize, amsgrad and nesterov off): Adam's weight decay
 * is L2 added to the gradient; AdamW's is decoupled, the weight scaled by
 * 1 - lr wd before the step; the bias corrections 1 - b^t are computed in
 * double from the step count t and enter as two fp32 scalars (lr / (1 - b1^t)
 * and sqrt(1 - b2^t)), as PyTorch computes them from a Python float. The
 * moments are updated as b m + (1 - b) g, which PyTorch writes as a lerp:
 * the two differ by float rounding, which tests/test_gpt_torch.c bounds.
 *
 * The loop zeroes the gradient as it goes: the runtime's kernels accumulate
 * into it, and this store replaces a separate pass over the same memory (the
 * update's bytes count it: sf_optimizer_update_bytes).
 */
#include <math.h>
#include <string.h>

#include "soapflow/cost.h"

static const char *const optimizer_names[SF_OPTIMIZER_COUNT] = {"sgd", "adam", "adamw"};
_Static_assert(sizeof optimizer_names / sizeof optimizer_names[0] == SF_OPTIMIZER_COUNT,
               "a name for every optimizer");

void sf_optimizer_default(sf_optimizer *o, sf_optimizer_kind kind) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == SF_OPTIMIZER_SGD ? 0.01 : 0.001;
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = kind == SF_OPTIMIZER_ADAMW ? 0.01 : 0;
}

const char *sf_optimizer_name(sf_optimizer_kind k) {
    if ((int)k < 0 || k >= SF_OPTIMIZER_COUNT) return "unknown";
    return optimizer_names[k];
}

int sf_optimizer_parse(const char *name, sf_optimizer_kind *out) {
    for (int k = 0; name && k < SF_OPTIMIZER_COUNT; k++)
        if (strcmp(name, optimizer_names[k]) == 0) {
            *out = (sf_optimizer_kind)k;
            return 0;
        }
    return -1;
}

int sf_optimizer_state_slots(sf_optimizer_kind k) { return k == SF_OPTIMIZER_SGD ? 1 : 2; }

double sf_optimizer_update_bytes(sf_optimizer_kind k, sf_dtype t) {
    /* the fp32 master and each state read and written, the gradient read and
     * zeroed, under mixed precision the compute copy written */
    double db = sf_dtype_bytes(t);
    return 8.0 * (1 + sf_optimizer_state_slots(k)) + db * (sf_dtype_mixed(t) ? 3 : 2);
}

double sf_optimizer_update_flops(sf_optimizer_kind k) {
    switch (k) {
    case SF_OPTIMIZER_ADAM: return 15;  /* L2 2, m 3, v 4, sqrt, /, +eps, m/denom, *step, -w */
    case SF_OPTIMIZER_ADAMW: return 14; /* decay 1 instead of L2 2 */
    default: return 6;                  /* L2 2, momentum 2, *lr, -w */
    }
}

static void sgd_step(const sf_optimizer *o, float *w, float *g, float *v, int64_t n) {
    const float lr = (float)o->lr, mu = (float)o->momentum, wd = (float)o->weight_decay;
    for (int64_t q = 0; q < n; q++) {
        float d = g[q] + wd * w[q];
        v[q] = mu * v[q] + d;
        w[q] -= lr * v[q];
        g[q] = 0.0f;
    }
}

static void adam_step(const sf_optimizer *o, int64_t t, float *w, float *g, float *m, float *v,
                      int64_t n) {
    const int decoupled = o->kind == SF_OPTIMIZER_ADAMW;
    const double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    const float step = (float)(o->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float c1 = (float)(1.0 - o->beta1), c2 = (float)(1.0 - o->beta2);
    const float l2 = decoupled ? 0.0f : (float)o->weight_decay;
    const float keep = (float)(1.0 - o->lr * o->weight_decay);
    for (int64_t q = 0; q < n; q++) {
        float gq = g[q];
        if (decoupled)
            w[q] *= keep;
        else if (l2 != 0.0f) /* PyTorch adds no zero decay (-0 stays -0) */
            gq += l2 * w[q];
        m[q] = b1 * m[q] + c1 * gq;
        v[q] = b2 * v[q] + c2 * gq * gq;
        float denom = sqrtf(v[q]) / bc2_sqrt + eps;
        w[q] -= step * (m[q] / denom);
        g[q] = 0.0f;
    }
}

void sf_optimizer_step(const sf_optimizer *o, int64_t t, float *w, float *g, float *s0, float *s1,
                       int64_t n) {
    if (o->kind == SF_OPTIMIZER_SGD)
        sgd_step(o, w, g, s0, n);
    else
        adam_step(o, t < 1 ? 1 : t, w, g, s0, s1, n);
}
