/* example_kernels.c - the example that opens include/soapflow/kernels.h, built
 * and run as a test (see example_core.c): the fast forward of a whole conv2d,
 * which must match the reference kernel's within float rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "soapflow/kernels.h"

/* The example's forward, fast, into y_tile. */
static sf_status example(const sf_op *op, const float *x_region, float *y_tile, const float *w) {
#include "kernels_example.inc"
    return s;
}

int main(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("k");
    sf_shape xs = sf_shape_make(4, (int64_t[]){2, 3, 7, 5});
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 4;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c =
        x < 0 ? -1 : sf_graph_add_op(g, SF_OP_CONV2D, "c", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (c < 0) {
        fprintf(stderr, "example_kernels: %s\n", err.msg);
        return 1;
    }
    const sf_op *op = sf_graph_op(g, c);
    sf_tile t = sf_tile_full(&op->space), r, o;
    sf_op_input_region(op, &t, 0, &r);
    sf_op_output_tile(op, &t, 0, &o);
    size_t nx = (size_t)sf_tile_numel(&r), ny = (size_t)sf_tile_numel(&o);
    size_t nw = (size_t)op->n_params, ws = sf_kernel_workspace_bytes(op, &t, 0);
    float *xv = malloc(nx * sizeof *xv), *w = malloc(nw * sizeof *w);
    float *fast = malloc(ny * sizeof *fast), *ref = malloc(ny * sizeof *ref);
    void *buf = ws ? malloc(ws) : NULL;
    int rc = !xv || !w || !fast || !ref || (ws && !buf);
    for (size_t i = 0; !rc && i < nx; i++) xv[i] = (float)((i * 37 % 11) - 5) / 8.0f;
    for (size_t i = 0; !rc && i < nw; i++) w[i] = (float)((i * 13 % 7) - 3) / 4.0f;
    if (!rc) rc = example(op, xv, fast, w) != SF_OK;
    if (!rc) {
        const float *in[1] = {xv};
        float *out[1] = {ref};
        sf_kernel_args a = {.op = op,
                            .tile = t,
                            .n_inputs = 1,
                            .in = in,
                            .in_region = &r,
                            .n_outputs = 1,
                            .out = out,
                            .weights = w,
                            .workspace = buf,
                            .workspace_bytes = ws};
        rc = sf_kernel_forward(&a, 0) != SF_OK;
    }
    for (size_t i = 0; !rc && i < ny; i++)
        if (!(fabsf(fast[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])))) {
            fprintf(stderr, "example_kernels: y[%zu] fast %g, reference %g\n", i, fast[i], ref[i]);
            rc = 1;
        }
    free(xv);
    free(w);
    free(fast);
    free(ref);
    free(buf);
    sf_graph_free(g);
    return rc;
}
