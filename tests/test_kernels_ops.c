/* Kernels of the element-wise, pooling, shape, normalization, loss and lookup
 * operators: for each, fast against reference on awkward shapes, the tiles of
 * uneven partitions stitched against the whole tensor, forward against a
 * double-precision definition written again here, every gradient against
 * double-precision central differences, backward accumulation, and the
 * operator-specific contracts (dropout masks, labels and loss, bad ids, tiles
 * that must hold a whole row). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "kernel_check.h"

#include "soapflow/graph.h"
#include "soapflow/kernels.h"

#define MAXIO 8 /* most inputs or outputs of an operator in these tests */

/* ---- helpers ----------------------------------------------------------- */

/* max|a - b| / max|b|. The denominator is at least 1e-2: inputs, weights and
 * output gradients here are O(1), so a tensor whose largest value is tinier (a
 * 1-element gelu gradient near its zero at x = -0.75: 2.5e-3) holds values made
 * by cancellation, whose rounding is better judged as an absolute error (below
 * 1e-7 for a bound of 1e-5). */
#define REL_FLOOR 1e-2

static double rel_err(const float *a, const float *b, int64_t n) {
    return err_floor(a, b, n, REL_FLOOR);
}

static double rel_err_d(const float *a, const double *b, int64_t n) {
    return err_floor_d(a, b, n, REL_FLOOR);
}

/* How to fill an input. */
enum { FILL_UNIFORM, FILL_AWAY0, FILL_DISTINCT, FILL_IDS };

/* Values for input data: uniform in [-1, 1); away from 0 (|x| in [0.05, 1.05));
 * distinct, at least 0.01 apart (a shuffled ramp, for max pooling); or integer
 * ids in [0, vocab) with repeats. */
static void fill(sf_rng *rng, float *p, int64_t n, int mode, int64_t vocab) {
    for (int64_t i = 0; i < n; i++) {
        double u = 2.0 * sf_rng_uniform(rng) - 1.0;
        switch (mode) {
        case FILL_AWAY0: p[i] = (float)(u < 0 ? u - 0.05 : u + 0.05); break;
        case FILL_DISTINCT: p[i] = (float)((double)i * 0.01 - 0.005 * (double)n); break;
        case FILL_IDS: p[i] = (float)(int64_t)(sf_rng_uniform(rng) * (double)vocab); break;
        default: p[i] = (float)u; break;
        }
    }
    if (mode == FILL_DISTINCT) {
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(sf_rng_uniform(rng) * (double)(i + 1));
            if (j > i) j = i;
            float t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
    }
}

/* ---- one operator in a graph, its data, and running it by tiles -------- */

typedef struct kop {
    sf_graph *g;
    const sf_op *op;
    int n_in, n_out;
    int64_t n_x[MAXIO], n_y[SF_MAX_SPLIT], n_w;
    int64_t rows; /* softmax_ce: rows of the whole tensor */
} kop;

static void kop_make(kop *o, sf_op_type type, const sf_shape *ins, int n_in,
                     const sf_op_params *p) {
    sf_error err = {0};
    memset(o, 0, sizeof *o);
    o->g = sf_graph_new("k");
    assert_non_null(o->g);
    sf_tensor_ref refs[MAXIO];
    for (int k = 0; k < n_in; k++) {
        char name[16];
        name[0] = 'x';
        name[1] = (char)('0' + k);
        name[2] = 0;
        int x = sf_graph_add_input(o->g, name, &ins[k], type == SF_OP_EMBEDDING, &err);
        assert_true(x >= 0);
        refs[k] = (sf_tensor_ref){x, 0};
    }
    int id = sf_graph_add_op(o->g, type, "op", p, refs, n_in, &err);
    if (id < 0) fail_msg("add_op %s: %s", sf_op_type_name(type), err.msg);
    o->op = sf_graph_op(o->g, id);
    o->n_in = o->op->n_inputs;
    o->n_out = o->op->n_outputs;
    assert_true(o->n_out <= MAXIO);
    for (int k = 0; k < o->n_in; k++) o->n_x[k] = sf_shape_numel(&o->op->in_shapes[k]);
    for (int k = 0; k < o->n_out; k++) o->n_y[k] = sf_shape_numel(&o->op->out_shapes[k]);
    o->n_w = o->op->n_params;
    const sf_shape *s0 = &o->op->out_shapes[0];
    o->rows = sf_shape_numel(s0) / s0->d[s0->ndim - 1];
}

/* Full-tensor inputs, weights, output gradients, labels and seed. */
typedef struct kdata {
    float *x[MAXIO], *w, *dy[MAXIO];
    int32_t *labels; /* softmax_ce: one per row of the whole tensor */
    uint64_t seed;
} kdata;

static void kdata_make(kdata *d, const kop *o, uint64_t seed, const int *fill_mode) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    memset(d, 0, sizeof *d);
    int64_t vocab = o->op->type == SF_OP_EMBEDDING ? o->op->params.embedding.num_embeddings : 0;
    for (int k = 0; k < o->n_in; k++) {
        d->x[k] = falloc(o->n_x[k]);
        fill(&rng, d->x[k], o->n_x[k], fill_mode ? fill_mode[k] : FILL_UNIFORM, vocab);
    }
    d->w = falloc(o->n_w);
    fill(&rng, d->w, o->n_w, FILL_UNIFORM, 0);
    if (o->op->type == SF_OP_BATCHNORM || o->op->type == SF_OP_LAYERNORM)
        for (int64_t i = 0; i < o->n_w / 2; i++) d->w[i] += 1.5f; /* scales away from 0 */
    for (int k = 0; k < o->n_out; k++) {
        d->dy[k] = falloc(o->n_y[k]);
        fill(&rng, d->dy[k], o->n_y[k], FILL_UNIFORM, 0);
    }
    if (o->op->type == SF_OP_SOFTMAX_CE) {
        const sf_shape *s = &o->op->out_shapes[0];
        d->labels = calloc((size_t)o->rows, sizeof *d->labels);
        assert_non_null(d->labels);
        for (int64_t r = 0; r < o->rows; r++)
            d->labels[r] = (int32_t)(sf_rng_uniform(&rng) * (double)s->d[s->ndim - 1]);
    }
    d->seed = seed * 7919 + 1;
}

static void kdata_free(kdata *d, const kop *o) {
    for (int k = 0; k < o->n_in; k++) free(d->x[k]);
    for (int k = 0; k < o->n_out; k++) free(d->dy[k]);
    free(d->w);
    free(d->labels);
}

/* Stitched results of running every tile of a partition. */
typedef struct kres {
    float *y[MAXIO], *dx[MAXIO], *dw;
    double loss;
} kres;

static void kres_make(kres *r, const kop *o) {
    memset(r, 0, sizeof *r);
    for (int k = 0; k < o->n_out; k++) r->y[k] = falloc(o->n_y[k]);
    for (int k = 0; k < o->n_in; k++) r->dx[k] = falloc(o->n_x[k]);
    r->dw = falloc(o->n_w);
}

static void kres_free(kres *r, const kop *o) {
    for (int k = 0; k < o->n_out; k++) free(r->y[k]);
    for (int k = 0; k < o->n_in; k++) free(r->dx[k]);
    free(r->dw);
}

/* Buffers and arguments of one tile. */
typedef struct ktile {
    sf_tile t, r[MAXIO], ot[MAXIO];
    float *x[MAXIO], *dx[MAXIO], *y[MAXIO], *dy[MAXIO], *ws;
    size_t ws_bytes;
    const float *in_arr[MAXIO];
    const float *dy_arr[MAXIO];
    int32_t *labels;
    sf_kernel_args a;
} ktile;

static void ktile_init(ktile *kt, const kop *o, const sf_tile *t, const kdata *d, float *dw,
                       double *loss) {
    const sf_op *op = o->op;
    memset(kt, 0, sizeof *kt);
    kt->t = *t;
    for (int k = 0; k < o->n_in; k++) {
        sf_op_input_region(op, t, k, &kt->r[k]);
        int64_t n = sf_tile_numel(&kt->r[k]);
        kt->x[k] = falloc(n);
        kt->dx[k] = falloc(n);
        region_copy(d->x[k], &op->in_shapes[k], &kt->r[k], kt->x[k], 0);
        kt->in_arr[k] = kt->x[k];
    }
    for (int k = 0; k < o->n_out; k++) {
        sf_op_output_tile(op, t, k, &kt->ot[k]);
        int64_t n = sf_tile_numel(&kt->ot[k]);
        kt->y[k] = falloc(n);
        kt->dy[k] = falloc(n);
        region_copy(d->dy[k], &op->out_shapes[k], &kt->ot[k], kt->dy[k], 0);
        kt->dy_arr[k] = kt->dy[k];
    }
    if (d->labels) {
        /* the labels of the tile's rows: leading dimensions of the tile */
        int nd = t->ndim;
        int64_t rows = sf_tile_numel(t) / (t->hi[nd - 1] > t->lo[nd - 1] ? t->hi[nd - 1] -
                                           t->lo[nd - 1] : 1);
        kt->labels = calloc((size_t)(rows > 0 ? rows : 1), sizeof *kt->labels);
        assert_non_null(kt->labels);
        int64_t idx[SF_MAX_DIMS] = {0};
        for (int64_t q = 0; q < rows; q++) {
            int64_t g = 0;
            for (int i = 0; i < nd - 1; i++) g = g * op->space.d[i] + t->lo[i] + idx[i];
            kt->labels[q] = d->labels[g];
            for (int i = nd - 2; i >= 0; i--) {
                if (++idx[i] < t->hi[i] - t->lo[i]) break;
                idx[i] = 0;
            }
        }
    }
    size_t wsb = sf_kernel_workspace_bytes(op, t, 0), wsb_b = sf_kernel_workspace_bytes(op, t, 1);
    if (wsb_b > wsb) wsb = wsb_b;
    kt->ws = ws_alloc(wsb);
    kt->ws_bytes = wsb;
    kt->a = (sf_kernel_args){
        .op = op, .tile = *t, .n_inputs = o->n_in, .in = kt->in_arr, .in_region = kt->r,
        .n_outputs = o->n_out, .out = kt->y, .weights = o->n_w > 0 ? d->w : NULL,
        .grad_out = kt->dy_arr, .grad_in = kt->dx, .grad_weights = dw,
        .workspace = kt->ws, .workspace_bytes = wsb, .seed = d->seed, .labels = kt->labels,
        .loss = loss,
    };
}

static void ktile_free(ktile *kt, const kop *o) {
    for (int k = 0; k < o->n_in; k++) {
        free(kt->x[k]);
        free(kt->dx[k]);
    }
    for (int k = 0; k < o->n_out; k++) {
        free(kt->y[k]);
        free(kt->dy[k]);
    }
    ws_free(kt->ws, kt->ws_bytes);
    free(kt->labels);
}

static sf_tile partition_tile(const sf_shape *space, const int *deg, int part) {
    sf_tile t;
    memset(&t, 0, sizeof t);
    t.ndim = space->ndim;
    for (int i = space->ndim - 1; i >= 0; i--) {
        sf_split_range(space->d[i], deg[i], part % deg[i], &t.lo[i], &t.hi[i]);
        part /= deg[i];
    }
    return t;
}

/* Forward then backward of every tile of the partition `deg` (degrees per
 * dimension of the parallel space), stitched into res. */
static void run_partition(const kop *o, const int *deg, int fast, const kdata *d, kres *res) {
    const sf_op *op = o->op;
    int parts = 1, partial = 0;
    for (int i = 0; i < op->space.ndim; i++) parts *= deg[i];
    /* parts along a reduction dimension (an embedding's vocabulary) hold partial
     * sums of their output piece: they add up to it (res starts zeroed) */
    for (int i = 0; i < op->space.ndim; i++) partial |= op->kinds[i] == SF_DIM_REDUCE && deg[i] > 1;
    for (int p = 0; p < parts; p++) {
        sf_tile t = partition_tile(&op->space, deg, p);
        ktile kt;
        ktile_init(&kt, o, &t, d, res->dw, &res->loss);
        sf_status s = sf_kernel_forward(&kt.a, fast);
        if (s != SF_OK) fail_msg("%s forward fast=%d: %d", sf_op_type_name(op->type), fast, s);
        if (!sf_tile_empty(&t)) {
            for (int k = 0; k < o->n_out; k++)
                region_copy(res->y[k], &op->out_shapes[k], &kt.ot[k], kt.y[k], partial ? 2 : 1);
            s = sf_kernel_backward(&kt.a, fast);
            if (s != SF_OK) fail_msg("%s backward fast=%d: %d", sf_op_type_name(op->type), fast, s);
            for (int k = 0; k < o->n_in; k++)
                region_copy(res->dx[k], &op->in_shapes[k], &kt.r[k], kt.dx[k], 2);
        }
        ktile_free(&kt, o);
    }
}

static const int WHOLE[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};

/* Every partition of degs, fast and reference, stitched, against the reference
 * on the whole tensor (exact), or against the reference on the same partition
 * (batch norm split on samples or positions: statistics per tile). */
static void check_partitions(const kop *o, const int (*degs)[SF_MAX_DIMS], int n_degs,
                             const kdata *d, int per_tile_stats) {
    kres base;
    kres_make(&base, o);
    run_partition(o, WHOLE, 0, d, &base);
    for (int p = -1; p < n_degs; p++) {
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        if (p >= 0)
            for (int i = 0; i < o->op->space.ndim; i++) deg[i] = degs[p][i];
        kres want;
        kres_make(&want, o);
        if (per_tile_stats) run_partition(o, deg, 0, d, &want);
        const kres *ref = per_tile_stats ? &want : &base;
        for (int fast = 0; fast < 2; fast++) {
            if (!per_tile_stats && p < 0 && !fast) continue; /* the baseline itself */
            kres got;
            kres_make(&got, o);
            run_partition(o, deg, fast, d, &got);
            double ey = 0, ex = 0, ew = rel_err(got.dw, ref->dw, o->n_w);
            for (int k = 0; k < o->n_out; k++) {
                double e = rel_err(got.y[k], ref->y[k], o->n_y[k]);
                ey = e > ey ? e : ey;
            }
            for (int k = 0; k < o->n_in; k++) {
                double e = rel_err(got.dx[k], ref->dx[k], o->n_x[k]);
                ex = e > ex ? e : ex;
            }
            double el = fabs(got.loss - ref->loss) / (fabs(ref->loss) > 1e-30 ? fabs(ref->loss)
                                                                              : 1e-30);
            if (ey > 1e-5 || ex > 1e-5 || ew > 1e-5 || el > 1e-5)
                fail_msg("%s partition %d (%d,%d,%d,%d,%d) fast=%d: y %g dx %g dw %g loss %g",
                         sf_op_type_name(o->op->type), p, deg[0], deg[1], deg[2], deg[3], deg[4],
                         fast, ey, ex, ew, el);
            kres_free(&got, o);
        }
        kres_free(&want, o);
    }
    kres_free(&base, o);
}

/* ---- double-precision definitions -------------------------------------- */

typedef void (*fwd_d_fn)(const sf_op *op, double *const *x, const double *w, double **y);

/* Strides of a row-major shape. */
static void strides_of(const sf_shape *s, int64_t *st) {
    int64_t m = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        st[i] = m;
        m *= s->d[i];
    }
}

static void unary_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    int64_t n = sf_shape_numel(&op->in_shapes[0]);
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i];
        switch (op->type) {
        case SF_OP_RELU: y[0][i] = v > 0 ? v : 0; break;
        case SF_OP_SIGMOID: y[0][i] = 1 / (1 + exp(-v)); break;
        case SF_OP_TANH: y[0][i] = tanh(v); break;
        case SF_OP_RELU6: y[0][i] = v > 0 ? (v < 6 ? v : 6) : 0; break;
        case SF_OP_LEAKY_RELU: y[0][i] = v > 0 ? v : op->params.leaky_relu.alpha * v; break;
        case SF_OP_HARD_SIGMOID: {
            double h = op->params.hard_sigmoid.alpha * v + op->params.hard_sigmoid.beta;
            y[0][i] = h < 0 ? 0 : h > 1 ? 1 : h;
            break;
        }
        case SF_OP_HARD_SWISH: y[0][i] = v * (v + 3 < 0 ? 0 : v + 3 > 6 ? 6 : v + 3) / 6; break;
        default:
            if (op->params.gelu.approximate == SF_GELU_TANH)
                y[0][i] = 0.5 * v *
                          (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
            else
                y[0][i] = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            break;
        }
    }
}

static void binary_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *os = &op->out_shapes[0];
    int64_t sa[SF_MAX_DIMS], sb[SF_MAX_DIMS], n = sf_shape_numel(os);
    strides_of(&op->in_shapes[0], sa);
    strides_of(&op->in_shapes[1], sb);
    for (int64_t e = 0; e < n; e++) {
        int64_t rem = e, ia = 0, ib = 0;
        for (int i = os->ndim - 1; i >= 0; i--) {
            int64_t c = rem % os->d[i];
            rem /= os->d[i];
            if (op->in_shapes[0].d[i] != 1) ia += c * sa[i];
            if (op->in_shapes[1].d[i] != 1) ib += c * sb[i];
        }
        y[0][e] = op->type == SF_OP_MUL ? x[0][ia] * x[1][ib] : x[0][ia] + x[1][ib];
    }
}

/* PyTorch's pooling, transcribed from its CPU kernels (AvgPool2d, MaxPool2d,
 * AdaptiveAvgPool2d) rather than from op_pool2d.c. */
static void pool_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_pool2d_params *q = &op->params.pool2d;
    const sf_shape *is = &op->in_shapes[0], *os = &op->out_shapes[0];
    int64_t NC = is->d[0] * is->d[1], H = is->d[2], W = is->d[3], OH = os->d[2], OW = os->d[3];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t hs, he, ws, we, div;
                if (q->mode == SF_POOL_ADAPTIVE_AVG) {
                    hs = (int64_t)floor((double)(oh * H) / (double)OH);
                    he = (int64_t)ceil((double)((oh + 1) * H) / (double)OH);
                    ws = (int64_t)floor((double)(ow * W) / (double)OW);
                    we = (int64_t)ceil((double)((ow + 1) * W) / (double)OW);
                    div = (he - hs) * (we - ws);
                } else {
                    hs = oh * q->stride[0] - q->padding[0];
                    ws = ow * q->stride[1] - q->padding[1];
                    he = hs + q->kernel[0] < H + q->padding[0] ? hs + q->kernel[0]
                                                                : H + q->padding[0];
                    we = ws + q->kernel[1] < W + q->padding[1] ? ws + q->kernel[1]
                                                                : W + q->padding[1];
                    int64_t pool_size = (he - hs) * (we - ws);
                    hs = hs > 0 ? hs : 0;
                    ws = ws > 0 ? ws : 0;
                    he = he < H ? he : H;
                    we = we < W ? we : W;
                    div = q->count_include_pad ? pool_size : (he - hs) * (we - ws);
                }
                double acc = q->mode == SF_POOL_MAX ? -INFINITY : 0;
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) {
                        double v = x[0][(nc * H + ih) * W + iw];
                        if (q->mode == SF_POOL_MAX) acc = v > acc ? v : acc;
                        else acc += v;
                    }
                y[0][(nc * OH + oh) * OW + ow] = q->mode == SF_POOL_MAX ? acc : acc / (double)div;
            }
}

static void concat_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *os = &op->out_shapes[0];
    int axis = op->params.concat.axis < 0 ? op->params.concat.axis + os->ndim
                                          : op->params.concat.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= os->d[i];
    for (int i = axis + 1; i < os->ndim; i++) inner *= os->d[i];
    int64_t e = 0;
    for (int64_t q = 0; q < outer; q++)
        for (int k = 0; k < op->n_inputs; k++) {
            int64_t run = op->in_shapes[k].d[axis] * inner;
            for (int64_t j = 0; j < run; j++) y[0][e++] = x[k][q * run + j];
        }
}

static void split_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *is = &op->in_shapes[0];
    int axis = op->params.split.axis < 0 ? op->params.split.axis + is->ndim
                                         : op->params.split.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= is->d[i];
    for (int i = axis + 1; i < is->ndim; i++) inner *= is->d[i];
    int64_t e = 0;
    for (int64_t q = 0; q < outer; q++)
        for (int k = 0; k < op->n_outputs; k++) {
            int64_t run = op->out_shapes[k].d[axis] * inner;
            for (int64_t j = 0; j < run; j++) y[k][q * run + j] = x[0][e++];
        }
}

static void copy_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    int64_t n = sf_shape_numel(&op->in_shapes[0]);
    for (int64_t i = 0; i < n; i++) y[0][i] = x[0][i];
}

/* The mask (0 or 1/(1-p)) of the dropout under test, taken from the kernel run
 * on ones: the hash is the definition, the kernel draws it. */
static const float *dropout_mask_d;

static void dropout_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    int64_t n = sf_shape_numel(&op->in_shapes[0]);
    for (int64_t i = 0; i < n; i++) y[0][i] = x[0][i] * dropout_mask_d[i];
}

static void batchnorm_d(const sf_op *op, double *const *x, const double *w, double **y) {
    const sf_shape *s = &op->in_shapes[0];
    int64_t N = s->d[0], C = s->d[1], S = sf_shape_numel(s) / (N * C);
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < S; q++) m += x[0][(n * C + c) * S + q];
        m /= (double)(N * S);
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < S; q++) {
                double dd = x[0][(n * C + c) * S + q] - m;
                v += dd * dd;
            }
        v /= (double)(N * S);
        double g = op->params.norm.affine ? w[c] : 1, b = op->params.norm.affine ? w[C + c] : 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < S; q++) {
                int64_t i = (n * C + c) * S + q;
                y[0][i] = (x[0][i] - m) / sqrt(v + op->params.norm.eps) * g + b;
            }
    }
}

static void layernorm_d(const sf_op *op, double *const *x, const double *w, double **y) {
    const sf_shape *s = &op->in_shapes[0];
    int64_t D = s->d[s->ndim - 1], R = sf_shape_numel(s) / D;
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x[0] + r * D;
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += xr[j];
        m /= (double)D;
        for (int64_t j = 0; j < D; j++) v += (xr[j] - m) * (xr[j] - m);
        v /= (double)D;
        for (int64_t j = 0; j < D; j++) {
            double h = (xr[j] - m) / sqrt(v + op->params.norm.eps);
            y[0][r * D + j] = op->params.norm.affine ? h * w[j] + w[D + j] : h;
        }
    }
}

static void softmax_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *s = &op->in_shapes[0];
    int64_t C = s->d[s->ndim - 1], R = sf_shape_numel(s) / C;
    for (int64_t r = 0; r < R; r++) {
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < C; j++) m = x[0][r * C + j] > m ? x[0][r * C + j] : m;
        for (int64_t j = 0; j < C; j++) z += exp(x[0][r * C + j] - m);
        for (int64_t j = 0; j < C; j++) y[0][r * C + j] = exp(x[0][r * C + j] - m) / z;
    }
}

static void embedding_d(const sf_op *op, double *const *x, const double *w, double **y) {
    int64_t D = op->params.embedding.embedding_dim, R = sf_shape_numel(&op->in_shapes[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < D; j++) y[0][r * D + j] = w[(int64_t)x[0][r] * D + j];
}

/* add_param, mul_param: y = x + w, x * w, w broadcast from PyTorch's shape
 * aligned with x's last dimensions. */
static void param_d(const sf_op *op, double *const *x, const double *w, double **y) {
    const sf_shape *s = &op->in_shapes[0];
    int nd = s->ndim, pn = op->params.param.ndim;
    int64_t n = sf_shape_numel(s), idx[SF_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t q = 0;
        for (int j = 0; j < pn; j++) {
            int64_t pd = op->params.param.shape[j];
            q = q * pd + (pd == 1 ? 0 : idx[j + nd - pn]);
        }
        y[0][e] = op->type == SF_OP_MUL_PARAM ? x[0][e] * w[q] : x[0][e] + w[q];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < s->d[i]) break;
            idx[i] = 0;
        }
    }
}
static void scale_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    int64_t n = sf_shape_numel(&op->in_shapes[0]);
    for (int64_t i = 0; i < n; i++) y[0][i] = x[0][i] * op->params.scale.mul + op->params.scale.add;
}

/* concat_param: the learned tensor's P positions before (or after) x's along the axis. */
static void concat_param_d(const sf_op *op, double *const *x, const double *w, double **y) {
    const sf_concat_param_params *q = &op->params.concat_param;
    const sf_shape *os = &op->out_shapes[0], *xs = &op->in_shapes[0];
    int nd = os->ndim, ax = q->axis;
    int64_t P = q->shape[ax], T = xs->d[ax], n = sf_shape_numel(os), idx[SF_MAX_DIMS] = {0};
    int64_t xoff = q->last ? 0 : P, toff = q->last ? T : 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t a = idx[ax], o = 0;
        if (a >= xoff && a < xoff + T) {
            for (int i = 0; i < nd; i++) o = o * xs->d[i] + (i == ax ? a - xoff : idx[i]);
            y[0][e] = x[0][o];
        } else {
            for (int i = 1; i < nd; i++) o = o * q->shape[i] + (i == ax ? a - toff : idx[i]);
            y[0][e] = w[o];
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < os->d[i]) break;
            idx[i] = 0;
        }
    }
}

/* transpose: output element idx is input element idx permuted back. */
static void transpose_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *os = &op->out_shapes[0], *xs = &op->in_shapes[0];
    int nd = os->ndim;
    int64_t st[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0}, n = sf_shape_numel(os);
    strides_of(xs, st);
    for (int64_t e = 0; e < n; e++) {
        int64_t o = 0;
        for (int k = 0; k < nd; k++) o += idx[k] * st[op->params.transpose.perm[k]];
        y[0][e] = x[0][o];
        for (int k = nd - 1; k >= 0; k--) {
            if (++idx[k] < os->d[k]) break;
            idx[k] = 0;
        }
    }
}

/* pad: zeros, and the input shifted by the pads before. */
static void pad_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *os = &op->out_shapes[0], *xs = &op->in_shapes[0];
    int nd = os->ndim;
    int64_t st[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0}, n = sf_shape_numel(os);
    strides_of(xs, st);
    for (int64_t e = 0; e < n; e++) {
        int64_t o = 0;
        int in = 1;
        for (int i = 0; i < nd; i++) {
            int64_t g = idx[i] - op->params.pad.pads[i];
            in = in && g >= 0 && g < xs->d[i];
            o += g * st[i];
        }
        y[0][e] = in ? x[0][o] : 0;
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < os->d[i]) break;
            idx[i] = 0;
        }
    }
}

/* reduce_mean: each output the mean of the inputs with its kept coordinates. */
static void reduce_mean_d(const sf_op *op, double *const *x, const double *w, double **y) {
    (void)w;
    const sf_shape *xs = &op->in_shapes[0];
    const sf_reduce_params *q = &op->params.reduce;
    int nd = xs->ndim;
    int64_t n = sf_shape_numel(xs), m = sf_shape_numel(&op->out_shapes[0]), cnt = n / m;
    int64_t idx[SF_MAX_DIMS] = {0};
    for (int64_t o = 0; o < m; o++) y[0][o] = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t o = 0;
        for (int i = 0; i < nd; i++) {
            int red = 0;
            for (int k = 0; k < q->n_axes; k++) red |= q->axes[k] == i;
            if (!red) o = o * xs->d[i] + idx[i];
        }
        y[0][o] += x[0][e] / (double)cnt;
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < xs->d[i]) break;
            idx[i] = 0;
        }
    }
}

/* ---- gradients against central differences ----------------------------- */

/* L = sum_k sum(y_k * rnd_k), or for softmax_ce the mean cross-entropy. */
static double loss_d(const kop *o, fwd_d_fn f, double *const *x, const double *w,
                     const kdata *d, double **y) {
    f(o->op, x, w, y);
    double s = 0;
    if (o->op->type == SF_OP_SOFTMAX_CE) {
        const sf_shape *sh = &o->op->out_shapes[0];
        int64_t C = sh->d[sh->ndim - 1];
        for (int64_t r = 0; r < o->rows; r++) s -= log(y[0][r * C + d->labels[r]]);
        return s / (double)o->rows;
    }
    for (int k = 0; k < o->n_out; k++)
        for (int64_t i = 0; i < o->n_y[k]; i++) s += y[k][i] * (double)d->dy[k][i];
    return s;
}

/* Forward of the whole tile against f, and the gradients of both kernels
 * against central differences of L in double; input k is differentiated unless
 * no_grad_input has bit k. Finite differences with step h. */
static void check_gradients(const kop *o, fwd_d_fn f, const kdata *d, double h,
                            unsigned no_grad_input) {
    double *xd[MAXIO], *yd[SF_MAX_SPLIT], *gx[MAXIO];
    double *wd = dalloc(o->n_w), *gw = dalloc(o->n_w);
    for (int k = 0; k < o->n_in; k++) {
        xd[k] = dalloc(o->n_x[k]);
        gx[k] = dalloc(o->n_x[k]);
        for (int64_t i = 0; i < o->n_x[k]; i++) xd[k][i] = d->x[k][i];
    }
    for (int k = 0; k < o->n_out; k++) yd[k] = dalloc(o->n_y[k]);
    for (int64_t i = 0; i < o->n_w; i++) wd[i] = d->w[i];

    /* forward against the definition (loss_d leaves it in yd), and the loss */
    double loss0 = loss_d(o, f, xd, wd, d, yd);
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, o);
        run_partition(o, WHOLE, fast, d, &r);
        for (int k = 0; k < o->n_out; k++) {
            double e = rel_err_d(r.y[k], yd[k], o->n_y[k]);
            if (e > 1e-5)
                fail_msg("%s fast=%d: forward output %d vs double: %g",
                         sf_op_type_name(o->op->type), fast, k, e);
        }
        if (o->op->type == SF_OP_SOFTMAX_CE && fabs(r.loss - loss0) > 1e-5 * fabs(loss0))
            fail_msg("softmax_ce fast=%d: loss %.9g vs %.9g", fast, r.loss, loss0);
        kres_free(&r, o);
    }

    for (int k = 0; k < o->n_in; k++) {
        if (no_grad_input >> k & 1) continue;
        for (int64_t i = 0; i < o->n_x[k]; i++) {
            double v = xd[k][i];
            xd[k][i] = v + h;
            double lp = loss_d(o, f, xd, wd, d, yd);
            xd[k][i] = v - h;
            double lm = loss_d(o, f, xd, wd, d, yd);
            xd[k][i] = v;
            gx[k][i] = (lp - lm) / (2 * h);
        }
    }
    for (int64_t i = 0; i < o->n_w; i++) {
        double v = wd[i];
        wd[i] = v + h;
        double lp = loss_d(o, f, xd, wd, d, yd);
        wd[i] = v - h;
        double lm = loss_d(o, f, xd, wd, d, yd);
        wd[i] = v;
        gw[i] = (lp - lm) / (2 * h);
    }
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, o);
        run_partition(o, WHOLE, fast, d, &r);
        for (int k = 0; k < o->n_in; k++) {
            if (no_grad_input >> k & 1) continue;
            double e = rel_err_d(r.dx[k], gx[k], o->n_x[k]);
            if (e > 1e-3)
                fail_msg("%s fast=%d: grad input %d err %g", sf_op_type_name(o->op->type), fast,
                         k, e);
        }
        double e = o->n_w ? rel_err_d(r.dw, gw, o->n_w) : 0;
        if (e > 1e-3)
            fail_msg("%s fast=%d: grad weights err %g", sf_op_type_name(o->op->type), fast, e);
        if (o->n_w && (o->op->type == SF_OP_BATCHNORM || o->op->type == SF_OP_LAYERNORM)) {
            int64_t half = o->n_w / 2; /* the shift gradient alone */
            e = rel_err_d(r.dw + half, gw + half, half);
            if (e > 1e-3) fail_msg("fast=%d: grad shift err %g", fast, e);
        }
        kres_free(&r, o);
    }
    for (int k = 0; k < o->n_in; k++) {
        free(xd[k]);
        free(gx[k]);
    }
    for (int k = 0; k < o->n_out; k++) free(yd[k]);
    free(wd);
    free(gw);
}

/* Backward twice gives twice the gradients of once; NULL gradients are allowed. */
static void check_accumulates(const kop *o, const kdata *d) {
    sf_tile t = sf_tile_full(&o->op->space);
    for (int fast = 0; fast < 2; fast++) {
        float *dw1 = falloc(o->n_w), *dw2 = falloc(o->n_w);
        ktile once, twice;
        ktile_init(&once, o, &t, d, dw1, NULL);
        ktile_init(&twice, o, &t, d, dw2, NULL);
        assert_int_equal(sf_kernel_backward(&once.a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&twice.a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&twice.a, fast), SF_OK);
        for (int64_t i = 0; i < o->n_w; i++) dw1[i] *= 2.0f;
        assert_true(rel_err(dw2, dw1, o->n_w) < 1e-6);
        for (int k = 0; k < o->n_in; k++) {
            int64_t n = sf_tile_numel(&once.r[k]);
            for (int64_t i = 0; i < n; i++) once.dx[k][i] *= 2.0f;
            assert_true(rel_err(twice.dx[k], once.dx[k], n) < 1e-6);
        }
        once.a.grad_in = NULL;
        once.a.grad_weights = NULL;
        assert_int_equal(sf_kernel_backward(&once.a, fast), SF_OK);
        ktile_free(&once, o);
        ktile_free(&twice, o);
        free(dw1);
        free(dw2);
    }
}

/* All of the above for one operator. */
static void check_op(const kop *o, fwd_d_fn f, const int (*degs)[SF_MAX_DIMS], int n_degs,
                     uint64_t seed, const int *fill_mode, double h) {
    assert_true(sf_kernel_available(o->op->type, 0) && sf_kernel_available(o->op->type, 1));
    kdata d;
    kdata_make(&d, o, seed, fill_mode);
    check_partitions(o, degs, n_degs, &d, 0);
    if (f) check_gradients(o, f, &d, h, o->op->type == SF_OP_EMBEDDING ? 1u : 0u);
    check_accumulates(o, &d);
    kdata_free(&d, o);
}

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const int DEGS4[][SF_MAX_DIMS] = {
    {2, 1, 1, 1, 1, 1}, {1, 3, 1, 1, 1, 1}, {1, 1, 2, 3, 1, 1}, {3, 2, 3, 2, 1, 1},
    {1, 1, 1, 7, 1, 1}, /* more parts than columns in some cases: empty tiles */
    {2, 2, 5, 1, 1, 1},
};

static sf_shape shp(int nd, int64_t a, int64_t b, int64_t c, int64_t d) {
    return sf_shape_make(nd, (int64_t[]){a, b, c, d});
}

/* ---- unary ------------------------------------------------------------- */

static void test_unary(void **state) {
    (void)state;
    static const sf_op_type types[] = {SF_OP_RELU,         SF_OP_SIGMOID,   SF_OP_TANH,
                                       SF_OP_GELU,         SF_OP_RELU6,     SF_OP_LEAKY_RELU,
                                       SF_OP_HARD_SIGMOID, SF_OP_HARD_SWISH};
    const sf_shape shapes[] = {shp(1, 1, 0, 0, 0), shp(2, 3, 37, 0, 0), shp(4, 2, 3, 5, 7),
                               shp(3, 1, 1, 13, 0)};
    for (int t = 0; t < N_OF(types); t++)
        for (int s = 0; s < N_OF(shapes); s++) {
            kop o;
            sf_op_params p;
            sf_op_params_default(types[t], &p);
            if (types[t] == SF_OP_LEAKY_RELU) p.leaky_relu.alpha = 0.2;
            kop_make(&o, types[t], &shapes[s], 1, &p);
            /* away from the kinks at 0 (relu, relu6, leaky_relu) */
            int kink = types[t] == SF_OP_RELU || types[t] == SF_OP_RELU6 ||
                       types[t] == SF_OP_LEAKY_RELU;
            int fm[1] = {kink ? FILL_AWAY0 : FILL_UNIFORM};
            check_op(&o, unary_d, DEGS4, N_OF(DEGS4), 100 + (uint64_t)(t * 10 + s), fm, 1e-3);
            sf_graph_free(o.g);
        }
    /* gelu's tanh form against its double definition */
    for (int s = 0; s < N_OF(shapes); s++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_GELU, &p);
        p.gelu.approximate = SF_GELU_TANH;
        kop_make(&o, SF_OP_GELU, &shapes[s], 1, &p);
        int fm[1] = {FILL_UNIFORM};
        check_op(&o, unary_d, DEGS4, N_OF(DEGS4), 190 + (uint64_t)s, fm, 1e-3);
        sf_graph_free(o.g);
    }
}

/* gelu with approximate "tanh", both kernels, against torch's values and autograd
 * gradients of F.gelu(x, approximate="tanh") (float64, torch 1.13); and the
 * default (erf) form is not it. */
static void test_gelu_tanh_torch(void **state) {
    (void)state;
    static const float xs[] = {-6.0f, -3.0f, -1.5f, -0.5f, 0.0f, 0.7f, 2.0f, 4.5f};
    static const float ty[] = {-8.43964898e-11f, -0.00363739208f, -0.100428423f, -0.15428599f, 0.0f,
                               0.530570135f,     1.95459769f,     4.49999486f};
    static const float tg[] = {-7.70997601e-10f, -0.0115841666f, -0.127710793f, 0.132630096f, 0.5f,
                               0.976357219f,     1.08609926f,    1.00002932f};
    const int n = N_OF(xs);
    for (int approx = 0; approx < 2; approx++) {
        sf_shape s = shp(2, 1, n, 0, 0);
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_GELU, &p);
        assert_int_equal(p.gelu.approximate, SF_GELU_NONE);
        p.gelu.approximate = approx ? SF_GELU_TANH : SF_GELU_NONE;
        kop_make(&o, SF_OP_GELU, &s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 164, NULL);
        for (int i = 0; i < n; i++) {
            d.x[0][i] = xs[i];
            d.dy[0][i] = 1.0f;
        }
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            int off = 0; /* the erf form differs from the tanh one at some point */
            for (int i = 0; i < n; i++) {
                float ey = fabsf(r.y[0][i] - ty[i]), eg = fabsf(r.dx[0][i] - tg[i]);
                if (approx && (ey > 2e-6f * fmaxf(1.0f, fabsf(ty[i])) || eg > 4e-6f))
                    fail_msg("gelu tanh fast=%d x=%g: y %.9g (torch %.9g), dx %.9g (torch %.9g)",
                             fast, xs[i], r.y[0][i], ty[i], r.dx[0][i], tg[i]);
                off += ey > 1e-5f || eg > 1e-5f;
            }
            if (!approx) assert_true(off > 0);
            kres_free(&r, &o);
        }
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* Wide inputs: the fast exp, tanh and erf over saturation and near zero. */
static void test_unary_range(void **state) {
    (void)state;
    static const sf_op_type types[] = {SF_OP_SIGMOID, SF_OP_TANH, SF_OP_GELU};
    sf_shape s = shp(2, 1, 4001, 0, 0);
    for (int t = 0; t < N_OF(types); t++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(types[t], &p);
        kop_make(&o, types[t], &s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 150, NULL);
        for (int64_t i = 0; i < o.n_x[0]; i++) d.x[0][i] = (float)(i - 2000) * 0.025f; /* +-50 */
        double *xd = dalloc(o.n_x[0]), *yd = dalloc(o.n_x[0]);
        for (int64_t i = 0; i < o.n_x[0]; i++) xd[i] = d.x[0][i];
        unary_d(o.op, &xd, NULL, &yd);
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            double worst = 0;
            for (int64_t i = 0; i < o.n_x[0]; i++) {
                /* sigmoid and tanh: relative to the value (their tails and tanh
                 * near 0 must keep their digits); gelu: to max(|y|, 1), since
                 * 1 + erf(x / sqrt 2) cancels in its left tail, as in PyTorch */
                double den = types[t] == SF_OP_GELU ? fmax(fabs(yd[i]), 1.0) : fabs(yd[i]);
                double e = den > 0 ? fabs(r.y[0][i] - yd[i]) / den : fabs(r.y[0][i]);
                worst = e > worst ? e : worst;
                assert_true(isfinite(r.dx[0][i]));
            }
            if (getenv("SF_TEST_VERBOSE"))
                print_message("%s fast=%d: worst error %g\n", sf_op_type_name(types[t]), fast,
                              worst);
            /* float rounding (a few 1e-7; 2.5e-7 for gelu's erf approximation),
             * with room, but tight enough to notice a worse exp */
            double bound = 5e-7;
            if (worst > bound) fail_msg("%s fast=%d: error %g", sf_op_type_name(types[t]), fast,
                                        worst);
            kres_free(&r, &o);
        }
        free(xd);
        free(yd);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* relu at exactly 0: output 0 and gradient 0 (PyTorch's choice), both kernels. */
static void test_relu_at_zero(void **state) {
    (void)state;
    sf_shape s = shp(2, 1, 9, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_RELU, &p);
    kop_make(&o, SF_OP_RELU, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 160, NULL);
    for (int64_t i = 0; i < 9; i++) {
        d.x[0][i] = (float)(i % 3) - 1.0f; /* -1, 0, 1, ... */
        d.dy[0][i] = 1.0f;
    }
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, &o);
        run_partition(&o, WHOLE, fast, &d, &r);
        for (int64_t i = 0; i < 9; i++) {
            assert_true(r.y[0][i] == (i % 3 == 2 ? 1.0f : 0.0f));
            assert_true(r.dx[0][i] == (i % 3 == 2 ? 1.0f : 0.0f));
        }
        kres_free(&r, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* relu6 and leaky_relu at and around their kinks (0, and relu6's 6), exactly,
 * both kernels: PyTorch's values and its gradient choices (hardtanh's 0 at both
 * kinks of relu6, alpha at 0 for leaky_relu). */
static void test_relu6_leaky_kinks(void **state) {
    (void)state;
    static const float xs[] = {-3.0f, -0.5f, 0.0f, 0.5f, 5.5f, 6.0f, 6.5f, 100.0f};
    static const float relu6_y[] = {0, 0, 0, 0.5f, 5.5f, 6, 6, 6};
    static const float relu6_g[] = {0, 0, 0, 1, 1, 0, 0, 0};
    const int n = N_OF(xs);
    for (int leaky = 0; leaky < 2; leaky++) {
        sf_shape s = shp(2, 1, n, 0, 0);
        sf_op_type type = leaky ? SF_OP_LEAKY_RELU : SF_OP_RELU6;
        kop o;
        sf_op_params p;
        sf_op_params_default(type, &p);
        if (leaky) p.leaky_relu.alpha = 0.25; /* a power of two: products are exact */
        kop_make(&o, type, &s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 161, NULL);
        for (int i = 0; i < n; i++) {
            d.x[0][i] = xs[i];
            d.dy[0][i] = 1.0f;
        }
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            for (int i = 0; i < n; i++) {
                float y = leaky ? (xs[i] > 0 ? xs[i] : 0.25f * xs[i]) : relu6_y[i];
                float g = leaky ? (xs[i] > 0 ? 1.0f : 0.25f) : relu6_g[i];
                assert_true(r.y[0][i] == y);
                assert_true(r.dx[0][i] == g);
            }
            kres_free(&r, &o);
        }
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* NaN in, NaN out, as in PyTorch, in both kernels: relu, relu6 and leaky_relu
 * give NaN for NaN (clamp_min, hardtanh) and pass the gradient through it
 * (threshold_backward and hardtanh_backward zero only where x <= 0 or x >= 6;
 * leaky_relu's slope alpha), and sigmoid, tanh and gelu give NaN values and
 * gradients; finite inputs beside the NaNs keep finite results. The relus
 * turned NaN into 0 (x > 0 ? x : 0), so that a NaN weight trained on with a
 * finite loss. */
static void test_unary_nan(void **state) {
    (void)state;
    static const sf_op_type types[] = {SF_OP_RELU, SF_OP_SIGMOID, SF_OP_TANH,
                                       SF_OP_GELU, SF_OP_RELU6,   SF_OP_LEAKY_RELU};
    /* 19 elements: past one 8- or 16-wide vector, so the fast loops' bodies and
     * tails both see a NaN */
    const int n = 19;
    sf_shape s = shp(2, 1, n, 0, 0);
    for (int t = 0; t < N_OF(types); t++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(types[t], &p);
        if (types[t] == SF_OP_LEAKY_RELU) p.leaky_relu.alpha = 0.25;
        kop_make(&o, types[t], &s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 162, NULL);
        for (int i = 0; i < n; i++) {
            d.x[0][i] = i % 3 == 0 ? NAN : (float)(i - 9) * 0.75f;
            d.dy[0][i] = 1.0f;
        }
        int passes = types[t] == SF_OP_RELU || types[t] == SF_OP_RELU6;
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            for (int i = 0; i < n; i++) {
                const char *name = sf_op_type_name(types[t]);
                if (i % 3 != 0) {
                    if (!isfinite(r.y[0][i]) || !isfinite(r.dx[0][i]))
                        fail_msg("%s fast=%d: finite x = %g gave %g, %g", name, fast,
                                 (double)d.x[0][i], (double)r.y[0][i], (double)r.dx[0][i]);
                    continue;
                }
                if (!isnan(r.y[0][i])) fail_msg("%s fast=%d: f(NaN) = %g", name, fast,
                                                 (double)r.y[0][i]);
                if (passes && r.dx[0][i] != 1.0f)
                    fail_msg("%s fast=%d: gradient at NaN %g, want dy", name, fast,
                             (double)r.dx[0][i]);
                if (types[t] == SF_OP_LEAKY_RELU && r.dx[0][i] != 0.25f)
                    fail_msg("%s fast=%d: gradient at NaN %g, want alpha * dy", name, fast,
                             (double)r.dx[0][i]);
                if (!passes && types[t] != SF_OP_LEAKY_RELU && !isnan(r.dx[0][i]))
                    fail_msg("%s fast=%d: gradient at NaN %g, want NaN", name, fast,
                             (double)r.dx[0][i]);
            }
            kres_free(&r, &o);
        }
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* ---- binary ------------------------------------------------------------ */

static void test_binary(void **state) {
    (void)state;
    const sf_shape pairs[][2] = {
        {shp(4, 2, 3, 5, 7), shp(4, 2, 3, 5, 7)},
        {shp(4, 2, 3, 5, 7), shp(4, 1, 3, 1, 1)}, /* a bias */
        {shp(4, 1, 3, 1, 7), shp(4, 2, 1, 5, 1)}, /* both broadcast, different dims */
        {shp(2, 4, 1, 0, 0), shp(2, 4, 6, 0, 0)}, /* stride 0 along the last dimension */
        {shp(3, 3, 5, 1, 0), shp(3, 1, 1, 1, 0)}, /* a scalar, last dimension 1 */
        {shp(1, 1, 0, 0, 0), shp(1, 11, 0, 0, 0)},
        {shp(3, 1, 1, 9, 0), shp(3, 5, 2, 9, 0)},
    };
    static const sf_op_type types[] = {SF_OP_ADD, SF_OP_MUL};
    for (int t = 0; t < N_OF(types); t++)
        for (int c = 0; c < N_OF(pairs); c++) {
            kop o;
            sf_op_params p;
            sf_op_params_default(types[t], &p);
            kop_make(&o, types[t], pairs[c], 2, &p);
            check_op(&o, binary_d, DEGS4, N_OF(DEGS4), 200 + (uint64_t)(t * 10 + c), NULL, 1e-2);
            sf_graph_free(o.g);
        }
}

/* ---- pool2d ------------------------------------------------------------ */

typedef struct pool_case {
    int mode;
    int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
    int ceil_mode, count_include_pad;
    int64_t oh, ow; /* adaptive */
} pool_case;

static const pool_case pool_cases[] = {
    {SF_POOL_MAX, 2, 3, 7, 11, 3, 3, 2, 2, 1, 1, 0, 1, 0, 0},
    {SF_POOL_MAX, 1, 2, 13, 9, 3, 2, 2, 3, 1, 1, 1, 1, 0, 0},  /* ceil_mode, odd strides */
    {SF_POOL_MAX, 2, 1, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0},   /* ceil: a partial window */
    {SF_POOL_MAX, 3, 2, 8, 7, 3, 3, 1, 1, 1, 1, 0, 1, 0, 0},   /* overlapping, stride 1 */
    {SF_POOL_MAX, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0},
    {SF_POOL_MAX, 3, 2, 8, 12, 2, 2, 2, 2, 0, 0, 0, 1, 0, 0},  /* 2x2 stride 2: its own loops */
    {SF_POOL_MAX, 2, 3, 9, 7, 2, 2, 2, 2, 0, 0, 0, 1, 0, 0},   /* the same, odd: a row and a
                                                                * column left out */
    {SF_POOL_AVG, 2, 3, 7, 11, 3, 3, 2, 2, 1, 1, 0, 1, 0, 0},
    {SF_POOL_AVG, 2, 3, 7, 11, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0},  /* count_include_pad off */
    {SF_POOL_AVG, 1, 2, 13, 9, 3, 2, 2, 3, 1, 1, 1, 1, 0, 0},  /* ceil past the padding */
    {SF_POOL_AVG, 1, 2, 13, 9, 3, 2, 2, 3, 1, 1, 1, 0, 0, 0},
    {SF_POOL_AVG, 2, 2, 6, 5, 5, 4, 3, 1, 2, 2, 1, 1, 0, 0},
    {SF_POOL_ADAPTIVE_AVG, 2, 3, 7, 11, 1, 1, 1, 1, 0, 0, 0, 1, 3, 4}, /* overlapping windows */
    {SF_POOL_ADAPTIVE_AVG, 1, 2, 5, 6, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1},  /* global average */
    {SF_POOL_ADAPTIVE_AVG, 1, 2, 3, 2, 1, 1, 1, 1, 0, 0, 0, 1, 5, 3},  /* upsampling */
};

static void pool_make(kop *o, const pool_case *k) {
    sf_shape s = shp(4, k->n, k->c, k->h, k->w);
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    sf_pool2d_params *q = &p.pool2d;
    q->mode = k->mode;
    q->kernel[0] = k->kh;
    q->kernel[1] = k->kw;
    q->stride[0] = k->sh;
    q->stride[1] = k->sw;
    q->padding[0] = k->ph;
    q->padding[1] = k->pw;
    q->ceil_mode = k->ceil_mode;
    q->count_include_pad = k->count_include_pad;
    q->output_size[0] = k->oh;
    q->output_size[1] = k->ow;
    kop_make(o, SF_OP_POOL2D, &s, 1, &p);
}

static void test_pool2d(void **state) {
    (void)state;
    for (int i = 0; i < N_OF(pool_cases); i++) {
        kop o;
        pool_make(&o, &pool_cases[i]);
        /* max: distinct inputs 0.01 apart, a step well below: no argmax flips */
        int fm[1] = {pool_cases[i].mode == SF_POOL_MAX ? FILL_DISTINCT : FILL_UNIFORM};
        check_op(&o, pool_d, DEGS4, N_OF(DEGS4), 300 + (uint64_t)i, fm, 1e-3);
        sf_graph_free(o.g);
    }
}

/* Ties: the gradient goes to one element per window (the first maximum), the
 * same one in both kernels. Inputs of 0s and 1s: every third element, or
 * scattered bits (a 2x2 window of every third element always holds exactly
 * one 1 when the rows are 7 wide, so it would test no tie). */
static void pool2d_ties(const pool_case *k, int scattered) {
    kop o;
    pool_make(&o, k);
    kdata d;
    kdata_make(&d, &o, 350, NULL);
    for (int64_t i = 0; i < o.n_x[0]; i++)
        d.x[0][i] = scattered ? (float)(((uint32_t)i * 0x9E3779B1u >> 13) & 1u)
                              : (float)(i % 3 == 0);
    for (int64_t i = 0; i < o.n_y[0]; i++) d.dy[0][i] = 1.0f;
    kres r0, r1;
    kres_make(&r0, &o);
    kres_make(&r1, &o);
    run_partition(&o, WHOLE, 0, &d, &r0);
    run_partition(&o, (const int[]){1, 1, 2, 3, 1, 1}, 1, &d, &r1);
    double s = 0;
    for (int64_t i = 0; i < o.n_x[0]; i++) {
        assert_true(r0.dx[0][i] == r1.dx[0][i]);
        s += r0.dx[0][i];
    }
    assert_true(fabs(s - (double)o.n_y[0]) < 1e-3);
    kres_free(&r0, &o);
    kres_free(&r1, &o);
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

static void test_pool2d_ties(void **state) {
    (void)state;
    pool2d_ties(&pool_cases[3], 0); /* overlapping windows */
    pool2d_ties(&pool_cases[3], 1);
    pool2d_ties(&pool_cases[6], 1); /* 2x2 stride 2, odd sizes */
}

/* NaN in a window: max and average pooling give NaN there, in both kernels and
 * on every tiling, and max pooling's gradient goes to the window's last NaN
 * (PyTorch's (v > max) || isnan(v)); the other windows are untouched. Max
 * pooling skipped NaNs (v > max), so a NaN activation came out finite. */
static void test_pool2d_nan(void **state) {
    (void)state;
    for (int c = 0; c < N_OF(pool_cases); c++) {
        const pool_case *k = &pool_cases[c];
        if (k->mode == SF_POOL_ADAPTIVE_AVG) continue;
        kop o;
        pool_make(&o, k);
        kdata d;
        int fm[1] = {FILL_DISTINCT};
        kdata_make(&d, &o, 360 + (uint64_t)c, fm);
        for (int64_t i = 0; i < o.n_x[0]; i++) {
            if ((i * 7 + 3) % 11 == 0) d.x[0][i] = NAN;
        }
        for (int64_t i = 0; i < o.n_y[0]; i++) d.dy[0][i] = 1.0f;
        /* the expected: windows by definition, in double */
        const sf_shape *ys = &o.op->out_shapes[0];
        int64_t OH = ys->d[2], OW = ys->d[3], H = k->h, W = k->w;
        float *want_y = falloc(o.n_y[0]), *want_dx = falloc(o.n_x[0]);
        for (int64_t nc = 0; nc < k->n * k->c; nc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t h0 = oh * k->sh - k->ph, w0 = ow * k->sw - k->pw;
                    int64_t last_nan = -1;
                    for (int64_t ih = h0; ih < h0 + k->kh; ih++)
                        for (int64_t iw = w0; iw < w0 + k->kw; iw++)
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W &&
                                isnan(d.x[0][(nc * H + ih) * W + iw]))
                                last_nan = (nc * H + ih) * W + iw;
                    int64_t yi = (nc * OH + oh) * OW + ow;
                    want_y[yi] = last_nan >= 0 ? NAN : 0.0f;
                    if (last_nan >= 0 && k->mode == SF_POOL_MAX) want_dx[last_nan] += 1.0f;
                }
        static const int degs[][SF_MAX_DIMS] = {{1, 1, 1, 1, 1, 1}, {2, 1, 3, 2, 1, 1}};
        for (int fast = 0; fast < 2; fast++)
            for (int g = 0; g < N_OF(degs); g++) {
                kres r;
                kres_make(&r, &o);
                run_partition(&o, degs[g], fast, &d, &r);
                for (int64_t i = 0; i < o.n_y[0]; i++)
                    if (isnan(r.y[0][i]) != isnan(want_y[i]))
                        fail_msg("pool case %d fast=%d tiling %d: y[%lld] = %g", c, fast, g,
                                 (long long)i, (double)r.y[0][i]);
                if (k->mode == SF_POOL_MAX)
                    for (int64_t i = 0; i < o.n_x[0]; i++)
                        if (isnan(d.x[0][i]) && r.dx[0][i] != want_dx[i])
                            fail_msg("pool case %d fast=%d tiling %d: dx at NaN %lld = %g, "
                                     "want %g", c, fast, g, (long long)i, (double)r.dx[0][i],
                                     (double)want_dx[i]);
                kres_free(&r, &o);
            }
        free(want_y);
        free(want_dx);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* ---- concat, split, reshape, flatten ----------------------------------- */

static void test_concat(void **state) {
    (void)state;
    const struct {
        int n, axis;
        sf_shape s[4];
    } cases[] = {
        {3, 1, {shp(4, 2, 3, 5, 4), shp(4, 2, 1, 5, 4), shp(4, 2, 4, 5, 4)}},
        {2, -1, {shp(3, 3, 2, 5, 0), shp(3, 3, 2, 2, 0)}},
        {4, 0, {shp(2, 1, 7, 0, 0), shp(2, 2, 7, 0, 0), shp(2, 1, 7, 0, 0), shp(2, 3, 7, 0, 0)}},
        {1, 1, {shp(2, 3, 5, 0, 0)}},
    };
    static const int degs[][SF_MAX_DIMS] = {
        {1, 2, 1, 1, 1, 1}, {1, 3, 1, 1, 1, 1}, {1, 5, 1, 1, 1, 1}, {2, 4, 2, 1, 1, 1},
        {3, 1, 1, 3, 1, 1}, {1, 8, 1, 1, 1, 1}, {5, 2, 1, 1, 1, 1},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_CONCAT, &p);
        p.concat.axis = cases[c].axis;
        kop_make(&o, SF_OP_CONCAT, cases[c].s, cases[c].n, &p);
        check_op(&o, concat_d, degs, N_OF(degs), 400 + (uint64_t)c, NULL, 1e-2);
        sf_graph_free(o.g);
    }
}

static void test_split(void **state) {
    (void)state;
    const struct {
        sf_shape s;
        int axis, parts;
        int64_t sizes[4];
    } cases[] = {
        {shp(4, 2, 8, 3, 5), 1, 3, {3, 1, 4, 0}},
        {shp(3, 3, 2, 7, 0), -1, 3, {0, 0, 0, 0}}, /* even: 2, 2, 3 */
        {shp(2, 5, 3, 0, 0), 0, 2, {2, 3, 0, 0}},
        {shp(2, 4, 6, 0, 0), 1, 1, {0, 0, 0, 0}},
    };
    static const int degs[][SF_MAX_DIMS] = {
        {1, 2, 1, 1, 1, 1}, {1, 3, 1, 1, 1, 1}, {1, 1, 4, 1, 1, 1}, {2, 5, 2, 1, 1, 1},
        {3, 1, 1, 3, 1, 1}, {1, 1, 1, 7, 1, 1},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_SPLIT, &p);
        p.split.axis = cases[c].axis;
        p.split.parts = cases[c].parts;
        for (int k = 0; k < 4; k++) p.split.sizes[k] = cases[c].sizes[k];
        kop_make(&o, SF_OP_SPLIT, &cases[c].s, 1, &p);
        check_op(&o, split_d, degs, N_OF(degs), 500 + (uint64_t)c, NULL, 1e-2);
        sf_graph_free(o.g);
    }
}

static void test_reshape_flatten(void **state) {
    (void)state;
    static const int degs[][SF_MAX_DIMS] = {{2, 1, 1, 1, 1, 1}, {3, 1, 1, 1, 1, 1},
                                            {5, 1, 1, 1, 1, 1}};
    /* tiles the planner never makes (split where the space says none), which the
     * kernels still compute exactly */
    static const int odd[][SF_MAX_DIMS] = {{2, 3, 1, 1, 1, 1}, {1, 2, 3, 1, 1, 1},
                                           {1, 1, 1, 2, 1, 1}};
    sf_shape s = shp(4, 3, 4, 5, 3);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_RESHAPE, &p);
    p.reshape.ndim = 3;
    p.reshape.shape[0] = 0;
    p.reshape.shape[1] = 6;
    p.reshape.shape[2] = -1;
    kop_make(&o, SF_OP_RESHAPE, &s, 1, &p);
    check_op(&o, copy_d, degs, N_OF(degs), 600, NULL, 1e-2);
    kdata d;
    kdata_make(&d, &o, 601, NULL);
    check_partitions(&o, odd, 2, &d, 0);
    kdata_free(&d, &o);
    sf_graph_free(o.g);

    for (int sd = 1; sd <= 3; sd++) {
        sf_op_params_default(SF_OP_FLATTEN, &p);
        p.flatten.start_dim = sd;
        kop_make(&o, SF_OP_FLATTEN, &s, 1, &p);
        check_op(&o, copy_d, degs, N_OF(degs), 610 + (uint64_t)sd, NULL, 1e-2);
        kdata_make(&d, &o, 620 + (uint64_t)sd, NULL);
        check_partitions(&o, odd + (sd == 3 ? 0 : 1), sd == 3 ? 3 : 2, &d, 0);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* ---- dropout ----------------------------------------------------------- */

static void dropout_make(kop *o, const sf_shape *s, double prob) {
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = prob;
    kop_make(o, SF_OP_DROPOUT, s, 1, &p);
}

/* The mask of the whole tensor: the forward of ones. */
static float *dropout_mask_of(const kop *o, const kdata *d) {
    kdata ones = *d;
    float *one = falloc(o->n_x[0]);
    for (int64_t i = 0; i < o->n_x[0]; i++) one[i] = 1.0f;
    ones.x[0] = one;
    kres r;
    kres_make(&r, o);
    run_partition(o, WHOLE, 0, &ones, &r);
    float *mask = r.y[0];
    r.y[0] = NULL;
    kres_free(&r, o);
    free(one);
    return mask;
}

static void test_dropout(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(4, 2, 3, 5, 7), shp(2, 1, 13, 0, 0), shp(3, 3, 1, 11, 0)};
    const double probs[] = {0.3, 0.0, 0.75};
    for (int c = 0; c < N_OF(shapes); c++)
        for (int q = 0; q < N_OF(probs); q++) {
            kop o;
            dropout_make(&o, &shapes[c], probs[q]);
            kdata d;
            kdata_make(&d, &o, 700 + (uint64_t)(c * 10 + q), NULL);
            float *mask = dropout_mask_of(&o, &d);
            float scale = (float)(1.0 / (1.0 - probs[q]));
            for (int64_t i = 0; i < o.n_x[0]; i++)
                assert_true(mask[i] == 0.0f || mask[i] == scale);
            dropout_mask_d = mask;
            /* any tiling draws the same mask (partitions), backward uses it (FD) */
            check_partitions(&o, DEGS4, N_OF(DEGS4), &d, 0);
            check_gradients(&o, dropout_d, &d, 1e-2, 0);
            check_accumulates(&o, &d);
            dropout_mask_d = NULL;
            free(mask);
            kdata_free(&d, &o);
            sf_graph_free(o.g);
        }
}

/* A dropped NaN stays NaN (PyTorch multiplies by the mask), in both kernels,
 * forward and backward: the fast kernel selected 0 for a dropped element. */
static void test_dropout_nan(void **state) {
    (void)state;
    sf_shape s = shp(2, 3, 37, 0, 0);
    kop o;
    dropout_make(&o, &s, 0.5);
    kdata d;
    kdata_make(&d, &o, 790, NULL);
    for (int64_t i = 0; i < o.n_x[0]; i++) {
        d.x[0][i] = NAN;
        d.dy[0][i] = NAN;
    }
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, &o);
        run_partition(&o, WHOLE, fast, &d, &r);
        for (int64_t i = 0; i < o.n_x[0]; i++)
            if (!isnan(r.y[0][i]) || !isnan(r.dx[0][i]))
                fail_msg("dropout fast=%d: NaN at %lld gave %g, %g", fast, (long long)i,
                         (double)r.y[0][i], (double)r.dx[0][i]);
        kres_free(&r, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* p = 0 is the identity, bit for bit; the drop rate is p; seeds and operators
 * draw different masks. */
static void test_dropout_mask(void **state) {
    (void)state;
    sf_shape s = shp(2, 64, 1601, 0, 0);
    kop o;
    dropout_make(&o, &s, 0.0);
    kdata d;
    kdata_make(&d, &o, 750, NULL);
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, &o);
        run_partition(&o, (const int[]){3, 5, 1, 1, 1, 1}, fast, &d, &r);
        assert_memory_equal(r.y[0], d.x[0], (size_t)o.n_x[0] * sizeof(float));
        assert_memory_equal(r.dx[0], d.dy[0], (size_t)o.n_x[0] * sizeof(float));
        kres_free(&r, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);

    dropout_make(&o, &s, 0.3);
    kdata_make(&d, &o, 751, NULL);
    float *m1 = dropout_mask_of(&o, &d);
    int64_t dropped = 0;
    for (int64_t i = 0; i < o.n_x[0]; i++) dropped += m1[i] == 0.0f;
    double rate = (double)dropped / (double)o.n_x[0]; /* ~100k draws: sd 0.0015 */
    if (fabs(rate - 0.3) > 0.01) fail_msg("drop rate %g for p = 0.3", rate);
    d.seed += 1;
    float *m2 = dropout_mask_of(&o, &d);
    int64_t differ = 0;
    for (int64_t i = 0; i < o.n_x[0]; i++) differ += m1[i] != m2[i];
    assert_true(differ > o.n_x[0] / 5); /* 2 p (1 - p) = 0.42 expected */
    free(m2);
    d.seed -= 1;
    /* a second dropout in the same graph, same seed: another mask */
    sf_error err = {0};
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = 0.3;
    int id2 = sf_graph_add_op(o.g, SF_OP_DROPOUT, "op2", &p, (sf_tensor_ref[]){{0, 0}}, 1, &err);
    assert_true(id2 >= 0);
    kop o2 = o;
    o2.op = sf_graph_op(o.g, id2);
    m2 = dropout_mask_of(&o2, &d);
    differ = 0;
    for (int64_t i = 0; i < o.n_x[0]; i++) differ += m1[i] != m2[i];
    assert_true(differ > o.n_x[0] / 5);
    free(m1);
    free(m2);
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* ---- batchnorm --------------------------------------------------------- */

static void test_batchnorm(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(4, 3, 5, 7, 5), shp(2, 6, 11, 0, 0), shp(3, 2, 4, 13, 0),
                               shp(4, 1, 3, 2, 3)};
    /* channel tiles: exact against the whole tensor */
    static const int by_channel[][SF_MAX_DIMS] = {{1, 2, 1, 1, 1, 1}, {1, 3, 1, 1, 1, 1},
                                                  {1, 7, 1, 1, 1, 1}};
    /* tiles split on samples or positions: statistics per tile, fast against
     * the reference on the same tiles */
    static const int per_tile[][SF_MAX_DIMS] = {{2, 1, 1, 1, 1, 1}, {2, 2, 2, 1, 1, 1},
                                                {1, 1, 2, 3, 1, 1}};
    for (int c = 0; c < N_OF(shapes); c++)
        for (int affine = 0; affine < 2; affine++) {
            kop o;
            sf_op_params p;
            sf_op_params_default(SF_OP_BATCHNORM, &p);
            p.norm.affine = affine;
            kop_make(&o, SF_OP_BATCHNORM, &shapes[c], 1, &p);
            uint64_t seed = 800 + (uint64_t)(c * 2 + affine);
            check_op(&o, batchnorm_d, by_channel, N_OF(by_channel), seed, NULL, 1e-3);
            kdata d;
            kdata_make(&d, &o, seed, NULL);
            check_partitions(&o, per_tile, N_OF(per_tile), &d, 1);
            kdata_free(&d, &o);
            sf_graph_free(o.g);
        }
}

/* Statistics per tile: a tile of half the samples is the batch norm of those
 * samples alone (per-device batch norm). */
static void test_batchnorm_tile_stats(void **state) {
    (void)state;
    sf_shape s = shp(4, 4, 3, 5, 2);
    sf_shape half = shp(4, 2, 3, 5, 2);
    kop o, oh;
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    kop_make(&o, SF_OP_BATCHNORM, &s, 1, &p);
    kop_make(&oh, SF_OP_BATCHNORM, &half, 1, &p);
    kdata d;
    kdata_make(&d, &o, 850, NULL);
    kres r;
    kres_make(&r, &o);
    run_partition(&o, (const int[]){2, 1, 1, 1, 1, 1}, 1, &d, &r);
    kdata dh = d; /* samples 2..3 of d as a tensor of their own */
    dh.x[0] = d.x[0] + oh.n_x[0];
    dh.dy[0] = d.dy[0] + oh.n_y[0];
    kres rh;
    kres_make(&rh, &oh);
    run_partition(&oh, WHOLE, 0, &dh, &rh);
    assert_true(rel_err(r.y[0] + oh.n_y[0], rh.y[0], oh.n_y[0]) < 1e-5);
    assert_true(rel_err(r.dx[0] + oh.n_x[0], rh.dx[0], oh.n_x[0]) < 1e-5);
    kres_free(&rh, &oh);
    kres_free(&r, &o);
    kdata_free(&d, &o);
    sf_graph_free(o.g);
    sf_graph_free(oh.g);
}

/* Channels of one and two elements, where the result is known and gradients
 * cancel: with one element, y = shift and dx = 0 exactly; with two, y = +-scale
 * + shift and dx nearly 0 (eps / (var + eps) of the usual size). Relative
 * comparisons of such gradients would measure only rounding; absolute bounds. */
static void test_batchnorm_tiny_channels(void **state) {
    (void)state;
    sf_shape s = shp(4, 2, 3, 1, 1);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    kop_make(&o, SF_OP_BATCHNORM, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 870, NULL);
    for (int64_t c = 0; c < 3; c++) { /* samples 0.6 or more apart */
        d.x[0][c] = 0.3f + 0.2f * (float)c;
        d.x[0][3 + c] = -0.3f - 0.1f * (float)c;
    }
    for (int fast = 0; fast < 2; fast++) {
        kres r;
        kres_make(&r, &o);
        run_partition(&o, WHOLE, fast, &d, &r);
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < 3; c++) {
                float want = (n == 0 ? 1.0f : -1.0f) * d.w[c] + d.w[3 + c];
                assert_true(fabs(r.y[0][n * 3 + c] - want) < 1e-3);
                assert_true(fabs(r.dx[0][n * 3 + c]) < 1e-3);
            }
        kres_free(&r, &o);
        kres_make(&r, &o);
        run_partition(&o, (const int[]){2, 1, 1, 1, 1, 1}, fast, &d, &r);
        for (int64_t i = 0; i < 6; i++) {
            assert_true(r.y[0][i] == d.w[3 + i % 3]);
            assert_true(r.dx[0][i] == 0.0f);
        }
        kres_free(&r, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* ---- layernorm --------------------------------------------------------- */

static void test_layernorm(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(3, 2, 5, 13, 0), shp(2, 7, 1, 0, 0), shp(2, 3, 37, 0, 0),
                               shp(4, 2, 3, 2, 9)};
    static const int degs[][SF_MAX_DIMS] = {{2, 1, 1, 1, 1, 1}, {3, 2, 1, 1, 1, 1},
                                            {1, 3, 2, 1, 1, 1}, {7, 1, 1, 1, 1, 1}};
    for (int c = 0; c < N_OF(shapes); c++)
        for (int affine = 0; affine < 2; affine++) {
            kop o;
            sf_op_params p;
            sf_op_params_default(SF_OP_LAYERNORM, &p);
            p.norm.affine = affine;
            kop_make(&o, SF_OP_LAYERNORM, &shapes[c], 1, &p);
            /* partitions never split the last dimension */
            int (*dg)[SF_MAX_DIMS] = malloc(sizeof degs);
            assert_non_null(dg);
            memcpy(dg, degs, sizeof degs);
            for (int k = 0; k < N_OF(degs); k++) dg[k][o.op->space.ndim - 1] = 1;
            check_op(&o, layernorm_d, (const int(*)[SF_MAX_DIMS])dg, N_OF(degs),
                     900 + (uint64_t)(c * 2 + affine), NULL, 1e-3);
            free(dg);
            sf_graph_free(o.g);
        }
}

/* Data far from zero with a small spread (100 + 0.01 u): x - mean cancels, and
 * the fast kernels must keep their accuracy (they sum around a pivot). */
static void test_norm_offset(void **state) {
    (void)state;
    const struct {
        sf_op_type type;
        sf_shape s;
        fwd_d_fn f;
    } cases[] = {
        {SF_OP_BATCHNORM, shp(4, 3, 4, 5, 6), batchnorm_d},
        {SF_OP_LAYERNORM, shp(3, 4, 5, 33, 0), layernorm_d},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(cases[c].type, &p);
        kop_make(&o, cases[c].type, &cases[c].s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 1050 + (uint64_t)c, NULL);
        for (int64_t i = 0; i < o.n_x[0]; i++) d.x[0][i] = 100.0f + 0.01f * d.x[0][i];
        double *xd = dalloc(o.n_x[0]), *wd = dalloc(o.n_w), *yd = dalloc(o.n_y[0]);
        for (int64_t i = 0; i < o.n_x[0]; i++) xd[i] = d.x[0][i];
        for (int64_t i = 0; i < o.n_w; i++) wd[i] = d.w[i];
        cases[c].f(o.op, &xd, wd, &yd);
        kres r0;
        kres_make(&r0, &o);
        run_partition(&o, WHOLE, 0, &d, &r0);
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            double ey = rel_err_d(r.y[0], yd, o.n_y[0]), ex = rel_err(r.dx[0], r0.dx[0], o.n_x[0]);
            if (ey > 1e-5 || ex > 1e-4)
                fail_msg("%s fast=%d: y vs double %g, dx vs reference %g",
                         sf_op_type_name(cases[c].type), fast, ey, ex);
            kres_free(&r, &o);
        }
        kres_free(&r0, &o);
        free(xd);
        free(wd);
        free(yd);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* ---- softmax with cross-entropy ---------------------------------------- */

static void test_softmax_ce(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(2, 5, 7, 0, 0), shp(3, 2, 3, 11, 0), shp(2, 1, 1, 0, 0),
                               shp(2, 4, 37, 0, 0)};
    static const int degs[][SF_MAX_DIMS] = {{2, 1, 1, 1, 1, 1}, {3, 2, 1, 1, 1, 1},
                                            {1, 3, 1, 1, 1, 1}, {7, 1, 1, 1, 1, 1}};
    for (int c = 0; c < N_OF(shapes); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
        kop_make(&o, SF_OP_SOFTMAX_CE, &shapes[c], 1, &p);
        int (*dg)[SF_MAX_DIMS] = malloc(sizeof degs);
        assert_non_null(dg);
        memcpy(dg, degs, sizeof degs);
        for (int k = 0; k < N_OF(degs); k++) dg[k][o.op->space.ndim - 1] = 1;
        kdata d;
        kdata_make(&d, &o, 1000 + (uint64_t)c, NULL);
        for (int64_t i = 0; i < o.n_x[0]; i++) d.x[0][i] *= 4.0f; /* confident rows too */
        /* the loss of the stitched tiles is part of the partition check */
        check_partitions(&o, (const int(*)[SF_MAX_DIMS])dg, N_OF(degs), &d, 0);
        check_gradients(&o, softmax_d, &d, 1e-3, 0);
        check_accumulates(&o, &d);
        free(dg);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* The tiles of partition deg (classes split deg[last] ways) run in the phases
 * of a vocabulary-parallel cross-entropy, each group of tiles that differ
 * only in their classes sharing one statistics buffer as the runtime's ranks
 * do after their all-reduces, stitched into res. */
static void run_class_partition(const kop *o, const int *deg, int fast, const kdata *d, kres *res) {
    const sf_op *op = o->op;
    int nd = op->space.ndim, parts = 1, per = deg[nd - 1];
    for (int i = 0; i < nd; i++) parts *= deg[i];
    for (int p0 = 0; p0 < parts; p0 += per) { /* a group: consecutive parts */
        ktile *kt = calloc((size_t)per, sizeof *kt);
        assert_non_null(kt);
        for (int k = 0; k < per; k++) {
            sf_tile t = partition_tile(&op->space, deg, p0 + k);
            ktile_init(&kt[k], o, &t, d, NULL, &res->loss);
        }
        const sf_tile *t0 = &kt[0].t;
        int64_t rows = 1;
        for (int i = 0; i + 1 < nd; i++) rows *= t0->hi[i] - t0->lo[i];
        float *stats = falloc(3 * rows);
        for (int64_t r = 0; r < rows; r++) stats[r] = -INFINITY;
        static const int phases[3] = {SF_CE_PHASE_MAX, SF_CE_PHASE_SUMS, SF_CE_PHASE_FULL};
        for (int q = 0; q < 3; q++) {
            int ph = phases[q];
            for (int k = 0; k < per; k++) {
                sf_kernel_args a = kt[k].a;
                a.stats = stats;
                a.phase = ph;
                if (ph != SF_CE_PHASE_FULL) a.loss = NULL;
                assert_int_equal(sf_kernel_forward(&a, fast), SF_OK);
                if (ph != SF_CE_PHASE_FULL) continue;
                region_copy(res->y[0], &op->out_shapes[0], &kt[k].ot[0], kt[k].y[0], 1);
                assert_int_equal(sf_kernel_backward(&a, fast), SF_OK);
                region_copy(res->dx[0], &op->in_shapes[0], &kt[k].r[0], kt[k].dx[0], 2);
            }
            if (ph == SF_CE_PHASE_MAX) /* the sums start from 0 */
                for (int64_t r = rows; r < 3 * rows; r++) stats[r] = 0.0f;
        }
        free(stats);
        for (int k = 0; k < per; k++) ktile_free(&kt[k], o);
        free(kt);
    }
}

/* Split on its classes (Megatron's vocabulary-parallel cross-entropy), run in
 * phases with the rows' statistics combined over the parts: the probabilities,
 * the loss and the logits' gradient of the whole tensor, fast and reference;
 * without the statistics such a tile is refused. */
static void test_softmax_ce_classes(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(2, 5, 7, 0, 0), shp(3, 2, 3, 11, 0), shp(2, 4, 37, 0, 0)};
    /* samples, the next dimension (when there are 3 or more), classes */
    static const int degs[][3] = {{1, 1, 2}, {2, 1, 3}, {1, 2, 4}, {2, 1, 7}, {3, 2, 5}};
    for (int c = 0; c < N_OF(shapes); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
        kop_make(&o, SF_OP_SOFTMAX_CE, &shapes[c], 1, &p);
        int nd = o.op->space.ndim;
        kdata d;
        kdata_make(&d, &o, 1200 + (uint64_t)c, NULL);
        for (int64_t i = 0; i < o.n_x[0]; i++) d.x[0][i] *= 4.0f;
        kres base;
        kres_make(&base, &o);
        run_partition(&o, WHOLE, 0, &d, &base);
        for (int k = 0; k < N_OF(degs); k++) {
            int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
            deg[0] = degs[k][0];
            if (nd > 2) deg[1] = degs[k][1];
            deg[nd - 1] = degs[k][2];
            int fits = 1;
            for (int i = 0; i < nd; i++) fits &= deg[i] <= o.op->space.d[i];
            if (!fits) continue;
            for (int fast = 0; fast < 2; fast++) {
                kres got;
                kres_make(&got, &o);
                run_class_partition(&o, deg, fast, &d, &got);
                double ey = rel_err(got.y[0], base.y[0], o.n_y[0]);
                double ex = rel_err(got.dx[0], base.dx[0], o.n_x[0]);
                double el = fabs(got.loss - base.loss) / fabs(base.loss);
                if (ey > 1e-5 || ex > 1e-5 || el > 1e-5)
                    fail_msg("softmax_ce classes (%d,%d,%d) fast=%d: y %g dx %g loss %g", deg[0],
                             deg[1], deg[2], fast, ey, ex, el);
                kres_free(&got, &o);
            }
        }
        /* a part of the classes without statistics, or an unknown phase */
        sf_tile t = sf_tile_full(&o.op->space);
        t.hi[nd - 1] = 2;
        ktile kt;
        ktile_init(&kt, &o, &t, &d, NULL, NULL);
        for (int fast = 0; fast < 2; fast++) {
            assert_int_equal(sf_kernel_forward(&kt.a, fast), SF_ERR_INVALID);
            assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_ERR_INVALID);
            sf_kernel_args a = kt.a;
            a.phase = SF_CE_PHASE_MAX; /* no statistics to take the maxima into */
            assert_int_equal(sf_kernel_forward(&a, fast), SF_ERR_INVALID);
            float st[64];
            a.stats = st;
            a.phase = 7;
            assert_int_equal(sf_kernel_forward(&a, fast), SF_ERR_INVALID);
            a.phase = SF_CE_PHASE_SUMS;
            kt.labels[0] = (int32_t)o.op->space.d[nd - 1]; /* == C */
            assert_int_equal(sf_kernel_forward(&a, fast), SF_ERR_INVALID);
            kt.labels[0] = 0;
        }
        ktile_free(&kt, &o);
        kres_free(&base, &o);
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
}

/* Labels are required by backward and checked; huge logits stay finite. */
static void test_softmax_ce_contract(void **state) {
    (void)state;
    sf_shape s = shp(2, 3, 4, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    kop_make(&o, SF_OP_SOFTMAX_CE, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 1100, NULL);
    d.x[0][0] = 1e30f;
    d.x[0][5] = -1e30f;
    sf_tile t = sf_tile_full(&o.op->space);
    for (int fast = 0; fast < 2; fast++) {
        double loss = 0;
        ktile kt;
        ktile_init(&kt, &o, &t, &d, NULL, &loss);
        assert_int_equal(sf_kernel_forward(&kt.a, fast), SF_OK);
        for (int64_t i = 0; i < o.n_y[0]; i++) assert_true(isfinite(kt.y[0][i]));
        assert_true(kt.y[0][0] == 1.0f);
        assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_OK);
        for (int64_t i = 0; i < o.n_x[0]; i++) assert_true(isfinite(kt.dx[0][i]));
        memset(kt.dx[0], 0, (size_t)o.n_x[0] * sizeof(float));
        sf_kernel_args bad = kt.a;
        bad.labels = NULL;
        assert_int_equal(sf_kernel_backward(&bad, fast), SF_ERR_INVALID);
        assert_int_equal(sf_kernel_forward(&bad, fast), SF_ERR_INVALID); /* loss without labels */
        bad.loss = NULL;
        assert_int_equal(sf_kernel_forward(&bad, fast), SF_OK); /* probabilities alone */
        kt.labels[2] = 4; /* == C */
        assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_ERR_INVALID);
        kt.labels[2] = -1;
        assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_ERR_INVALID);
        for (int64_t i = 0; i < o.n_x[0]; i++) assert_true(kt.dx[0][i] == 0.0f);
        /* a tile that cuts the classes */
        bad = kt.a;
        bad.tile.hi[1] = 2;
        sf_tile r2 = bad.tile;
        bad.in_region = &r2;
        assert_int_equal(sf_kernel_forward(&bad, fast), SF_ERR_INVALID);
        ktile_free(&kt, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* ---- embedding --------------------------------------------------------- */

static void test_embedding(void **state) {
    (void)state;
    const struct {
        sf_shape ids;
        int64_t vocab, dim;
    } cases[] = {
        {shp(2, 3, 5, 0, 0), 7, 11},  /* 15 tokens from 7 ids: repeats */
        {shp(1, 13, 0, 0, 0), 1, 3},  /* a single id */
        {shp(3, 2, 3, 2, 0), 50, 1},
        {shp(2, 1, 1, 0, 0), 5, 17},
    };
    static const int degs[][SF_MAX_DIMS] = {{2, 1, 1, 1, 1, 1}, {1, 2, 3, 1, 1, 1},
                                            {3, 1, 5, 1, 1, 1}, {1, 1, 2, 2, 1, 1},
                                            {2, 2, 1, 4, 1, 1}, {2, 1, 1, 1, 3, 1}};
    /* the last: the vocabulary (a reduction) of the rank-3 ids split in three */
    for (int c = 0; c < N_OF(cases); c++) {
        kop o;
        sf_op_params p;
        sf_op_params_default(SF_OP_EMBEDDING, &p);
        p.embedding.num_embeddings = cases[c].vocab;
        p.embedding.embedding_dim = cases[c].dim;
        kop_make(&o, SF_OP_EMBEDDING, &cases[c].ids, 1, &p);
        int fm[1] = {FILL_IDS};
        check_op(&o, embedding_d, degs, N_OF(degs), 1200 + (uint64_t)c, fm, 1e-2);
        sf_graph_free(o.g);
    }
}

static void test_embedding_bad_ids(void **state) {
    (void)state;
    sf_shape s = shp(2, 2, 3, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 5;
    p.embedding.embedding_dim = 4;
    kop_make(&o, SF_OP_EMBEDDING, &s, 1, &p);
    int fm[1] = {FILL_IDS};
    kdata d;
    kdata_make(&d, &o, 1300, fm);
    const float bad_ids[] = {5.0f, -1.0f, 2.5f, NAN, 1e10f};
    sf_tile t = sf_tile_full(&o.op->space);
    for (int b = 0; b < N_OF(bad_ids); b++)
        for (int fast = 0; fast < 2; fast++) {
            float *dw = falloc(o.n_w);
            ktile kt;
            ktile_init(&kt, &o, &t, &d, dw, NULL);
            kt.x[0][4] = bad_ids[b];
            for (int64_t i = 0; i < o.n_y[0]; i++) kt.y[0][i] = 42.0f;
            assert_int_equal(sf_kernel_forward(&kt.a, fast), SF_ERR_INVALID);
            assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_ERR_INVALID);
            for (int64_t i = 0; i < o.n_y[0]; i++) assert_true(kt.y[0][i] == 42.0f);
            for (int64_t i = 0; i < o.n_w; i++) assert_true(dw[i] == 0.0f);
            ktile_free(&kt, &o);
            free(dw);
        }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* ---- the rest of the contract ------------------------------------------ */

static void test_layernorm_needs_whole_rows(void **state) {
    (void)state;
    sf_shape s = shp(2, 3, 8, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    kop_make(&o, SF_OP_LAYERNORM, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 1400, NULL);
    sf_tile t = sf_tile_full(&o.op->space);
    t.hi[1] = 5;
    for (int fast = 0; fast < 2; fast++) {
        ktile kt;
        ktile_init(&kt, &o, &t, &d, NULL, NULL);
        assert_int_equal(sf_kernel_forward(&kt.a, fast), SF_ERR_INVALID);
        assert_int_equal(sf_kernel_backward(&kt.a, fast), SF_ERR_INVALID);
        ktile_free(&kt, &o);
    }
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

/* The graph input has no kernels (op_input.c says why); every other operator
 * of this file has both. */
/* ---- element-wise with a constant: add_param, mul_param, scale ---------- */

static void test_param_ops(void **state) {
    (void)state;
    /* (input, weight shape): a position embedding (1, T, D), a rank-2 one (T, D),
     * a per-channel (C, 1, 1) and a (1, C, 1, 1), a last-dimension vector, a
     * scalar, one varying along three dimensions, and one with a broadcast
     * dimension between its two parameter dimensions */
    static const struct {
        sf_shape x;
        int pn;
        int64_t pd[4];
    } cases[] = {
        {{3, {3, 5, 4}}, 3, {1, 5, 4}},    {{3, {2, 5, 7}}, 2, {5, 7}},
        {{4, {2, 3, 4, 5}}, 3, {3, 1, 1}}, {{4, {2, 3, 4, 5}}, 4, {1, 3, 1, 1}},
        {{3, {3, 1, 6}}, 1, {6}},          {{2, {4, 3}}, 0, {0}},
        {{4, {2, 3, 4, 5}}, 3, {3, 4, 5}}, {{4, {3, 4, 3, 5}}, 3, {4, 1, 5}},
    };
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < N_OF(cases); c++) {
            sf_op_type type = t ? SF_OP_MUL_PARAM : SF_OP_ADD_PARAM;
            sf_op_params p;
            sf_op_params_default(type, &p);
            p.param.ndim = cases[c].pn;
            for (int j = 0; j < cases[c].pn; j++) p.param.shape[j] = cases[c].pd[j];
            kop o;
            kop_make(&o, type, &cases[c].x, 1, &p);
            int64_t numel = 1;
            for (int j = 0; j < cases[c].pn; j++) numel *= cases[c].pd[j];
            assert_int_equal(o.op->n_params, numel);
            check_op(&o, param_d, DEGS4, N_OF(DEGS4), 1700 + (uint64_t)(t * 20 + c), NULL, 1e-3);
            sf_graph_free(o.g);
        }
}

static void test_scale(void **state) {
    (void)state;
    const sf_shape shapes[] = {shp(1, 1, 0, 0, 0), shp(3, 2, 3, 17, 0), shp(4, 2, 3, 5, 7)};
    const double muls[] = {1, -0.5, 3}, adds[] = {2, 0, -1.25};
    for (int s = 0; s < N_OF(shapes); s++) {
        sf_op_params p;
        sf_op_params_default(SF_OP_SCALE, &p);
        p.scale.mul = muls[s];
        p.scale.add = adds[s];
        kop o;
        kop_make(&o, SF_OP_SCALE, &shapes[s], 1, &p);
        check_op(&o, scale_d, DEGS4, N_OF(DEGS4), 1750 + (uint64_t)s, NULL, 1e-3);
        sf_graph_free(o.g);
    }
}

/* The class token of ViT (1, 1, D) first along T, a (1, C, 2, W) block after x on
 * the channels of a 4-D input, and one along the last dimension. */
static void test_concat_param(void **state) {
    (void)state;
    static const struct {
        sf_shape x;
        int axis, last;
        int64_t pd[4];
    } cases[] = {
        {{3, {3, 5, 4}}, 1, 0, {1, 1, 4}},
        {{4, {2, 3, 2, 5}}, 1, 1, {1, 2, 2, 5}},
        {{3, {2, 3, 4}}, 2, 0, {1, 3, 3}},
        {{3, {2, 3, 4}}, 2, 1, {1, 3, 2}},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        sf_op_params p;
        sf_op_params_default(SF_OP_CONCAT_PARAM, &p);
        p.concat_param.axis = cases[c].axis;
        p.concat_param.last = cases[c].last;
        p.concat_param.ndim = cases[c].x.ndim;
        for (int j = 0; j < cases[c].x.ndim; j++) p.concat_param.shape[j] = cases[c].pd[j];
        kop o;
        kop_make(&o, SF_OP_CONCAT_PARAM, &cases[c].x, 1, &p);
        check_op(&o, concat_param_d, DEGS4, N_OF(DEGS4), 1760 + (uint64_t)c, NULL, 1e-3);
        sf_graph_free(o.g);
    }
}

/* ConvNeXt's NHWC permutes both ways, a channel shuffle's swap of two middle
 * dimensions of a 5-D tensor, a head reshape's (N, T, h, d) to (N, h, T, d), the
 * identity, and the last dimension kept last (row copies). */
static void test_transpose(void **state) {
    (void)state;
    static const struct {
        sf_shape x;
        int64_t perm[5];
    } cases[] = {
        {{4, {2, 3, 4, 5}}, {0, 2, 3, 1}},       {{4, {2, 4, 5, 3}}, {0, 3, 1, 2}},
        {{5, {2, 2, 3, 2, 3}}, {0, 2, 1, 3, 4}}, {{4, {2, 5, 3, 4}}, {0, 2, 1, 3}},
        {{3, {3, 4, 5}}, {0, 1, 2}},             {{3, {3, 4, 5}}, {0, 2, 1}},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        sf_op_params p;
        sf_op_params_default(SF_OP_TRANSPOSE, &p);
        p.transpose.ndim = cases[c].x.ndim;
        for (int k = 0; k < cases[c].x.ndim; k++) p.transpose.perm[k] = cases[c].perm[k];
        kop o;
        kop_make(&o, SF_OP_TRANSPOSE, &cases[c].x, 1, &p);
        for (int k = 0; k < cases[c].x.ndim; k++)
            assert_int_equal(o.op->out_shapes[0].d[k], cases[c].x.d[cases[c].perm[k]]);
        check_op(&o, transpose_d, DEGS4, N_OF(DEGS4), 1770 + (uint64_t)c, NULL, 1e-3);
        sf_graph_free(o.g);
    }
}

/* Symmetric spatial pads, ZeroPad2d's asymmetric ones, pads on channels and on
 * the last dimension only, and pads wider than the input. */
static void test_pad(void **state) {
    (void)state;
    static const struct {
        sf_shape x;
        int64_t pads[8];
    } cases[] = {
        {{4, {2, 3, 4, 5}}, {0, 0, 1, 1, 0, 0, 1, 1}},
        {{4, {2, 3, 4, 5}}, {0, 0, 2, 1, 0, 0, 0, 0}},
        {{3, {3, 4, 5}}, {0, 2, 0, 0, 1, 0}},
        {{2, {3, 4}}, {0, 3, 0, 2}},
        {{3, {2, 1, 2}}, {0, 4, 3, 0, 2, 5}},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        sf_op_params p;
        sf_op_params_default(SF_OP_PAD, &p);
        p.pad.n_pads = 2 * cases[c].x.ndim;
        for (int k = 0; k < p.pad.n_pads; k++) p.pad.pads[k] = cases[c].pads[k];
        kop o;
        kop_make(&o, SF_OP_PAD, &cases[c].x, 1, &p);
        check_op(&o, pad_d, DEGS4, N_OF(DEGS4), 1780 + (uint64_t)c, NULL, 1e-3);
        sf_graph_free(o.g);
    }
}

/* MnasNet's mean over H and W (kept and dropped), a mean over the last axis, over
 * tokens, over two separated dimensions, and over a dimension of size 1. */
static void test_reduce_mean(void **state) {
    (void)state;
    static const struct {
        sf_shape x;
        int n, keep;
        int64_t axes[3];
    } cases[] = {
        {{4, {2, 3, 4, 5}}, 2, 0, {2, 3}}, {{4, {2, 3, 4, 5}}, 2, 1, {2, 3}},
        {{3, {3, 4, 7}}, 1, 1, {2}},       {{3, {3, 6, 4}}, 1, 0, {1}},
        {{4, {2, 3, 4, 5}}, 2, 1, {1, 3}}, {{3, {3, 1, 4}}, 1, 0, {1}},
    };
    for (int c = 0; c < N_OF(cases); c++) {
        sf_op_params p;
        sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
        p.reduce.n_axes = cases[c].n;
        p.reduce.keepdims = cases[c].keep;
        for (int k = 0; k < cases[c].n; k++) p.reduce.axes[k] = cases[c].axes[k];
        kop o;
        kop_make(&o, SF_OP_REDUCE_MEAN, &cases[c].x, 1, &p);
        check_op(&o, reduce_mean_d, DEGS4, N_OF(DEGS4), 1790 + (uint64_t)c, NULL, 1e-3);
        sf_graph_free(o.g);
    }
}

/* hard_sigmoid and hard_swish at and around their kinks, exactly, both kernels:
 * torch's values and gradients (hardsigmoid_backward 0 at the kinks,
 * hardswish_backward x / 3 + 1/2 at x = -3 and 3, 0 below, 1 above); and
 * hard_sigmoid at ONNX's default slope, its kinks inside [-1, 1) where the
 * gradient check of test_unary does not go (torch's are at -3 and 3). */
static void test_hard_kinks(void **state) {
    (void)state;
    static const float xs[] = {-6.0f, -3.0f, -1.5f, 0.0f, 1.5f, 3.0f, 4.5f};
    static const float hsig_y[] = {0, 0, 0.25f, 0.5f, 0.75f, 1, 1};
    static const float hsig_g[] = {0, 0, 1.0f / 6, 1.0f / 6, 1.0f / 6, 0, 0};
    static const float hsw_y[] = {0, 0, -0.375f, 0, 1.125f, 3, 4.5f};
    static const float hsw_g[] = {0, -0.5f, 0, 0.5f, 1, 1.5f, 1};
    const int n = N_OF(xs);
    for (int sw = 0; sw < 2; sw++) {
        sf_shape s = shp(2, 1, n, 0, 0);
        sf_op_type type = sw ? SF_OP_HARD_SWISH : SF_OP_HARD_SIGMOID;
        kop o;
        sf_op_params p;
        sf_op_params_default(type, &p);
        kop_make(&o, type, &s, 1, &p);
        kdata d;
        kdata_make(&d, &o, 162, NULL);
        for (int i = 0; i < n; i++) {
            d.x[0][i] = xs[i];
            d.dy[0][i] = 1.0f;
        }
        for (int fast = 0; fast < 2; fast++) {
            kres r;
            kres_make(&r, &o);
            run_partition(&o, WHOLE, fast, &d, &r);
            for (int i = 0; i < n; i++) {
                float y = sw ? hsw_y[i] : hsig_y[i], g = sw ? hsw_g[i] : hsig_g[i];
                if (fabsf(r.y[0][i] - y) > 1e-6f || fabsf(r.dx[0][i] - g) > 1e-6f)
                    fail_msg("%s fast=%d x=%g: y %g (want %g), dx %g (want %g)",
                             sf_op_type_name(type), fast, xs[i], r.y[0][i], y, r.dx[0][i], g);
            }
            kres_free(&r, &o);
        }
        kdata_free(&d, &o);
        sf_graph_free(o.g);
    }
    /* ONNX's default HardSigmoid (0.2, 0.5), away from its kinks at -2.5 and 2.5,
     * on a wide range */
    sf_shape s = shp(2, 3, 11, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_HARD_SIGMOID, &p);
    p.hard_sigmoid.alpha = 0.2;
    kop_make(&o, SF_OP_HARD_SIGMOID, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 163, NULL);
    for (int64_t i = 0; i < o.n_x[0]; i++) {
        float v = d.x[0][i] * 5.0f;                     /* [-5, 5) */
        d.x[0][i] = fabsf(fabsf(v) - 2.5f) < 0.05f ? 0.0f : v; /* not at a kink */
    }
    check_gradients(&o, unary_d, &d, 1e-3, 0);
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

static void test_availability(void **state) {
    (void)state;
    assert_int_equal(sf_kernel_available(SF_OP_INPUT, 0), 0);
    assert_int_equal(sf_kernel_available(SF_OP_INPUT, 1), 0);
    static const sf_op_type types[] = {
        SF_OP_POOL2D, SF_OP_EMBEDDING, SF_OP_RELU, SF_OP_SIGMOID, SF_OP_TANH,
        SF_OP_GELU, SF_OP_ADD, SF_OP_MUL, SF_OP_CONCAT, SF_OP_SPLIT,
        SF_OP_RESHAPE, SF_OP_FLATTEN, SF_OP_SOFTMAX_CE, SF_OP_BATCHNORM, SF_OP_LAYERNORM,
        SF_OP_DROPOUT, SF_OP_RELU6, SF_OP_LEAKY_RELU, SF_OP_ADD_PARAM, SF_OP_MUL_PARAM,
        SF_OP_SCALE, SF_OP_CONCAT_PARAM, SF_OP_TRANSPOSE, SF_OP_PAD, SF_OP_REDUCE_MEAN,
        SF_OP_HARD_SIGMOID, SF_OP_HARD_SWISH,
    };
    for (int i = 0; i < N_OF(types); i++)
        assert_true(sf_kernel_available(types[i], 0) && sf_kernel_available(types[i], 1));
    sf_shape s = shp(2, 2, 3, 0, 0);
    kop o;
    sf_op_params p;
    sf_op_params_default(SF_OP_RELU, &p);
    kop_make(&o, SF_OP_RELU, &s, 1, &p);
    kdata d;
    kdata_make(&d, &o, 1500, NULL);
    sf_tile t = sf_tile_full(&o.op->space);
    ktile kt;
    ktile_init(&kt, &o, &t, &d, NULL, NULL);
    sf_kernel_args a = kt.a;
    a.op = sf_graph_op(o.g, 0);
    a.n_inputs = 0;
    assert_int_equal(sf_kernel_forward(&a, 0), SF_ERR_UNSUPPORTED);
    ktile_free(&kt, &o);
    kdata_free(&d, &o);
    sf_graph_free(o.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_unary_range),
        cmocka_unit_test(test_relu6_leaky_kinks),
        cmocka_unit_test(test_relu_at_zero),
        cmocka_unit_test(test_unary_nan),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_pool2d),
        cmocka_unit_test(test_pool2d_ties),
        cmocka_unit_test(test_pool2d_nan),
        cmocka_unit_test(test_dropout_nan),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_reshape_flatten),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_dropout_mask),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_batchnorm_tile_stats),
        cmocka_unit_test(test_batchnorm_tiny_channels),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_norm_offset),
        cmocka_unit_test(test_softmax_ce),
        cmocka_unit_test(test_softmax_ce_contract),
        cmocka_unit_test(test_softmax_ce_classes),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_embedding_bad_ids),
        cmocka_unit_test(test_layernorm_needs_whole_rows),
        cmocka_unit_test(test_param_ops),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_concat_param),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_reduce_mean),
        cmocka_unit_test(test_hard_kinks),
        cmocka_unit_test(test_gelu_tanh_torch),
        cmocka_unit_test(test_availability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
