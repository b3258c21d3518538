/*
 * zoo_cnn.c - the plain convolutional networks: LeNet-5, AlexNet and VGG-16.
 *
 * AlexNet and VGG-16 are torchvision's (torchvision/models/alexnet.py, vgg.py)
 * layer for layer, with the same trainable parameter count, and their operators
 * carry torchvision's module paths ("features.0", "classifier.6"), so a
 * torchvision state dict maps onto the graph by name. The ReLU, pooling and
 * dropout modules keep their index too, which is why the numbers skip.
 * LeNet-5 is the classic one on 28x28 MNIST (the first convolution padded by 2
 * to get LeCun's 32x32 field), 61,706 parameters.
 *
 * Each model ends in softmax with cross-entropy ("loss").
 */
#include "zoo_impl.h"

sf_graph *sf_zoo_lenet5(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "lenet5", err) != SF_OK) return NULL;
    sf_tensor_ref x = sf_zoo_input(b, "input", 4, (int64_t[]){o->batch, 1, 28, 28}, 0);
    x = sf_zoo_conv(b, "conv1", x, 6, 5, 5, 1, 2, 2, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "relu1", x);
    x = sf_zoo_maxpool(b, "pool1", x, 2, 2, 0);
    x = sf_zoo_conv(b, "conv2", x, 16, 5, 5, 1, 0, 0, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "relu2", x);
    x = sf_zoo_maxpool(b, "pool2", x, 2, 2, 0);
    x = sf_zoo_flatten(b, "flatten", x);
    x = sf_zoo_linear(b, "fc1", x, 120, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "relu3", x);
    x = sf_zoo_linear(b, "fc2", x, 84, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "relu4", x);
    x = sf_zoo_linear(b, "fc3", x, 10, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}

/* features.<i> is a conv+relu pair (i, i+1) as torchvision numbers them. */
static sf_tensor_ref conv_relu(sf_zoo_builder *b, int *i, sf_tensor_ref x, int64_t cout,
                               int64_t k, int64_t stride, int64_t pad) {
    x = sf_zoo_conv(b, sf_zoo_name(b, "features.%d", *i), x, cout, k, k, stride, pad, pad, 1);
    x = sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "features.%d", *i + 1), x);
    *i += 2;
    return x;
}

static sf_tensor_ref features_maxpool(sf_zoo_builder *b, int *i, sf_tensor_ref x, int64_t k,
                                      int64_t stride) {
    x = sf_zoo_maxpool(b, sf_zoo_name(b, "features.%d", *i), x, k, stride, 0);
    *i += 1;
    return x;
}

sf_graph *sf_zoo_alexnet(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "alexnet", err) != SF_OK) return NULL;
    sf_tensor_ref x = sf_zoo_input(b, "input", 4, (int64_t[]){o->batch, 3, 224, 224}, 0);
    int i = 0;
    x = conv_relu(b, &i, x, 64, 11, 4, 2);
    x = features_maxpool(b, &i, x, 3, 2);
    x = conv_relu(b, &i, x, 192, 5, 1, 2);
    x = features_maxpool(b, &i, x, 3, 2);
    x = conv_relu(b, &i, x, 384, 3, 1, 1);
    x = conv_relu(b, &i, x, 256, 3, 1, 1);
    x = conv_relu(b, &i, x, 256, 3, 1, 1);
    x = features_maxpool(b, &i, x, 3, 2);
    x = sf_zoo_adaptive_avgpool(b, "avgpool", x, 6, 6);
    x = sf_zoo_flatten(b, "flatten", x);
    x = sf_zoo_dropout(b, "classifier.0", x, 0.5);
    x = sf_zoo_linear(b, "classifier.1", x, 4096, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "classifier.2", x);
    x = sf_zoo_dropout(b, "classifier.3", x, 0.5);
    x = sf_zoo_linear(b, "classifier.4", x, 4096, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "classifier.5", x);
    x = sf_zoo_linear(b, "classifier.6", x, 1000, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}

sf_graph *sf_zoo_vgg16(const sf_model_options *o, sf_error *err) {
    /* torchvision's configuration "D": output channels, 0 for a max pool. */
    static const int64_t cfg[] = {64,  64,  0,   128, 128, 0,   256, 256, 256,
                                  0,   512, 512, 512, 0,   512, 512, 512, 0};
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "vgg16", err) != SF_OK) return NULL;
    sf_tensor_ref x = sf_zoo_input(b, "input", 4, (int64_t[]){o->batch, 3, 224, 224}, 0);
    int i = 0;
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++)
        x = cfg[k] ? conv_relu(b, &i, x, cfg[k], 3, 1, 1) : features_maxpool(b, &i, x, 2, 2);
    x = sf_zoo_adaptive_avgpool(b, "avgpool", x, 7, 7);
    x = sf_zoo_flatten(b, "flatten", x);
    x = sf_zoo_linear(b, "classifier.0", x, 4096, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "classifier.1", x);
    x = sf_zoo_dropout(b, "classifier.2", x, 0.5);
    x = sf_zoo_linear(b, "classifier.3", x, 4096, 1);
    x = sf_zoo_act(b, SF_OP_RELU, "classifier.4", x);
    x = sf_zoo_dropout(b, "classifier.5", x, 0.5);
    x = sf_zoo_linear(b, "classifier.6", x, 1000, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}
