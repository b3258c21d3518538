/*
 * zoo_resnet.c - ResNet-18, -50 and -101 as torchvision builds them (resnet.py).
 *
 * Stem: conv1 7x7/2 without bias, bn1, relu, 3x3/2 max pool. Four stages of
 * blocks (64, 128, 256, 512 planes; stages 2-4 start with stride 2), global
 * average pool, fc to 1000 classes. ResNet-18 uses basic blocks (two 3x3
 * convolutions); ResNet-50/101 use bottlenecks (1x1, 3x3, 1x1 with expansion 4)
 * with the stride on the 3x3 convolution ("ResNet v1.5", as torchvision does).
 * A block gets a projection shortcut (1x1 conv without bias + batchnorm) when its
 * stride is not 1 or its input width differs from its output width.
 *
 * Operators carry torchvision's module paths ("layer3.4.conv2",
 * "layer1.0.downsample.0"); the functional parts torchvision does not name get
 * names beside them ("layer3.4.relu1", "layer3.4.add"). Batchnorm eps is 1e-5.
 */
#include <stdio.h>

#include "zoo_impl.h"

#define BN_EPS 1e-5

static sf_tensor_ref conv_bn(sf_zoo_builder *b, const char *pfx, const char *conv,
                             const char *bn, sf_tensor_ref x, int64_t cout, int64_t k,
                             int64_t stride) {
    x = sf_zoo_conv(b, sf_zoo_name(b, "%s.%s", pfx, conv), x, cout, k, k, stride, k / 2, k / 2,
                    0);
    return sf_zoo_batchnorm(b, sf_zoo_name(b, "%s.%s", pfx, bn), x, BN_EPS);
}

/* Adds the shortcut (projected when needed) to `y`, then the final relu. */
static sf_tensor_ref block_out(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                               sf_tensor_ref y, int64_t cout, int64_t stride) {
    sf_tensor_ref shortcut = x;
    if (stride != 1 || sf_zoo_shape(b, x).d[1] != cout)
        shortcut = conv_bn(b, pfx, "downsample.0", "downsample.1", x, cout, 1, stride);
    y = sf_zoo_add(b, sf_zoo_name(b, "%s.add", pfx), y, shortcut);
    return sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "%s.relu", pfx), y);
}

static sf_tensor_ref basic_block(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                                 int64_t planes, int64_t stride) {
    sf_tensor_ref y = conv_bn(b, pfx, "conv1", "bn1", x, planes, 3, stride);
    y = sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "%s.relu1", pfx), y);
    y = conv_bn(b, pfx, "conv2", "bn2", y, planes, 3, 1);
    return block_out(b, pfx, x, y, planes, stride);
}

static sf_tensor_ref bottleneck(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                                int64_t planes, int64_t stride) {
    sf_tensor_ref y = conv_bn(b, pfx, "conv1", "bn1", x, planes, 1, 1);
    y = sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "%s.relu1", pfx), y);
    y = conv_bn(b, pfx, "conv2", "bn2", y, planes, 3, stride);
    y = sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "%s.relu2", pfx), y);
    y = conv_bn(b, pfx, "conv3", "bn3", y, planes * 4, 1, 1);
    return block_out(b, pfx, x, y, planes * 4, stride);
}

static sf_graph *resnet(const char *name, const int blocks[4], int use_bottleneck,
                        const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, name, err) != SF_OK) return NULL;
    sf_tensor_ref x = sf_zoo_input(b, "input", 4, (int64_t[]){o->batch, 3, 224, 224}, 0);
    x = sf_zoo_conv(b, "conv1", x, 64, 7, 7, 2, 3, 3, 0);
    x = sf_zoo_batchnorm(b, "bn1", x, BN_EPS);
    x = sf_zoo_act(b, SF_OP_RELU, "relu", x);
    x = sf_zoo_maxpool(b, "maxpool", x, 3, 2, 1);
    for (int stage = 0; stage < 4; stage++) {
        int64_t planes = (int64_t)64 << stage;
        for (int i = 0; i < blocks[stage]; i++) {
            char pfx[32];
            snprintf(pfx, sizeof pfx, "layer%d.%d", stage + 1, i);
            int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
            x = use_bottleneck ? bottleneck(b, pfx, x, planes, stride)
                               : basic_block(b, pfx, x, planes, stride);
        }
    }
    x = sf_zoo_adaptive_avgpool(b, "avgpool", x, 1, 1);
    x = sf_zoo_flatten(b, "flatten", x);
    x = sf_zoo_linear(b, "fc", x, 1000, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}

sf_graph *sf_zoo_resnet18(const sf_model_options *o, sf_error *err) {
    return resnet("resnet18", (const int[]){2, 2, 2, 2}, 0, o, err);
}

sf_graph *sf_zoo_resnet50(const sf_model_options *o, sf_error *err) {
    return resnet("resnet50", (const int[]){3, 4, 6, 3}, 1, o, err);
}

sf_graph *sf_zoo_resnet101(const sf_model_options *o, sf_error *err) {
    return resnet("resnet101", (const int[]){3, 4, 23, 3}, 1, o, err);
}
