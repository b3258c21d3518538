/*
 * zoo_mlp.c - a multilayer perceptron: dense layers with relu between them.
 *
 * Sizes come from the options (mlp_sizes[0..n_mlp): input features, hidden
 * widths..., classes); the default 784-4096-4096-10 is MNIST-shaped with hidden
 * layers wide enough that splitting their weights pays (the classic case for
 * model parallelism in a dense network). Layers are "fc1".."fcK" with
 * "relu1".."relu<K-1>" after all but the last, then softmax with cross-entropy.
 */
#include "zoo_impl.h"

sf_graph *sf_zoo_mlp(const sf_model_options *o, sf_error *err) {
    static const int64_t default_sizes[] = {784, 4096, 4096, 10};
    const int64_t *sizes = o->mlp_sizes;
    int n = o->n_mlp;
    if (n == 0) {
        sizes = default_sizes;
        n = (int)(sizeof default_sizes / sizeof default_sizes[0]);
    }
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "mlp", err) != SF_OK) return NULL;
    if (n < 2) sf_zoo_fail(b, SF_ERR_INVALID, "mlp needs at least 2 sizes (input, classes)");
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 1)
            sf_zoo_fail(b, SF_ERR_INVALID, "mlp size %d must be >= 1, got %lld", i,
                        (long long)sizes[i]);
    }
    sf_tensor_ref x = sf_zoo_input(b, "input", 2, (int64_t[]){o->batch, sizes[0]}, 0);
    for (int i = 1; i < n; i++) {
        x = sf_zoo_linear(b, sf_zoo_name(b, "fc%d", i), x, sizes[i], 1);
        if (i < n - 1) x = sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "relu%d", i), x);
    }
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}
