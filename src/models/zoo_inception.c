/*
 * zoo_inception.c - Inception-v3 as torchvision builds it (inception.py), without
 * the auxiliary classifier, on 299x299 images.
 *
 * Every convolution is torchvision's BasicConv2d: a convolution without bias,
 * batchnorm with eps 0.001, relu. The modules are Inception A (Mixed_5b-5d),
 * B (Mixed_6a, grid reduction), C (Mixed_6b-6e, factorized 7x7), D (Mixed_7a,
 * grid reduction) and E (Mixed_7b-7c, expanded 3x3); then global average pool,
 * dropout 0.5 and fc to 1000 classes. The branches of a module are written in
 * torchvision's order, and their outputs concatenated on channels in that order.
 *
 * Operators carry torchvision's module paths ("Mixed_6b.branch7x7_2.conv",
 * ".bn"; the relu gets ".relu"); the pools torchvision calls functionally get
 * names beside them ("Mixed_5b.branch_pool.avgpool", "Mixed_5b.concat").
 * The 299 input keeps the shapes torchvision's comments give: 35x35 at
 * Mixed_5b, 17x17 at Mixed_6a's output, 8x8 from Mixed_7a on.
 */
#include <stdio.h>

#include "zoo_impl.h"

#define BN_EPS 1e-3

/* BasicConv2d "<pfx>.<name>" with a (kh, kw) kernel and (ph, pw) padding. */
static sf_tensor_ref basic(sf_zoo_builder *b, const char *pfx, const char *name, sf_tensor_ref x,
                           int64_t cout, int64_t kh, int64_t kw, int64_t stride, int64_t ph,
                           int64_t pw) {
    char full[SF_ZOO_NAME_MAX];
    if (pfx)
        snprintf(full, sizeof full, "%s.%s", pfx, name);
    else
        snprintf(full, sizeof full, "%s", name);
    x = sf_zoo_conv(b, sf_zoo_name(b, "%s.conv", full), x, cout, kh, kw, stride, ph, pw, 0);
    x = sf_zoo_batchnorm(b, sf_zoo_name(b, "%s.bn", full), x, BN_EPS);
    return sf_zoo_act(b, SF_OP_RELU, sf_zoo_name(b, "%s.relu", full), x);
}

/* Square kernel k, padding k / 2 when `same`, else none. */
static sf_tensor_ref basic_sq(sf_zoo_builder *b, const char *pfx, const char *name,
                              sf_tensor_ref x, int64_t cout, int64_t k, int64_t stride, int same) {
    int64_t pad = same ? k / 2 : 0;
    return basic(b, pfx, name, x, cout, k, k, stride, pad, pad);
}

/* 1 x n and n x 1 factorized convolutions with "same" padding. */
static sf_tensor_ref basic_1xn(sf_zoo_builder *b, const char *pfx, const char *name,
                               sf_tensor_ref x, int64_t cout, int64_t n) {
    return basic(b, pfx, name, x, cout, 1, n, 1, 0, n / 2);
}

static sf_tensor_ref basic_nx1(sf_zoo_builder *b, const char *pfx, const char *name,
                               sf_tensor_ref x, int64_t cout, int64_t n) {
    return basic(b, pfx, name, x, cout, n, 1, 1, n / 2, 0);
}

/* The average-pool branch of A, C and E: 3x3/1 pad 1 then a 1x1 BasicConv2d. */
static sf_tensor_ref pool_branch(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                                 int64_t cout) {
    x = sf_zoo_avgpool(b, sf_zoo_name(b, "%s.branch_pool.avgpool", pfx), x, 3, 1, 1);
    return basic_sq(b, pfx, "branch_pool", x, cout, 1, 1, 1);
}

static sf_tensor_ref concat(sf_zoo_builder *b, const char *pfx, const sf_tensor_ref *xs, int n) {
    return sf_zoo_concat(b, sf_zoo_name(b, "%s.concat", pfx), xs, n, 1);
}

static sf_tensor_ref inception_a(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                                 int64_t pool_features) {
    sf_tensor_ref br[4];
    br[0] = basic_sq(b, pfx, "branch1x1", x, 64, 1, 1, 1);
    br[1] = basic_sq(b, pfx, "branch5x5_1", x, 48, 1, 1, 1);
    br[1] = basic_sq(b, pfx, "branch5x5_2", br[1], 64, 5, 1, 1);
    br[2] = basic_sq(b, pfx, "branch3x3dbl_1", x, 64, 1, 1, 1);
    br[2] = basic_sq(b, pfx, "branch3x3dbl_2", br[2], 96, 3, 1, 1);
    br[2] = basic_sq(b, pfx, "branch3x3dbl_3", br[2], 96, 3, 1, 1);
    br[3] = pool_branch(b, pfx, x, pool_features);
    return concat(b, pfx, br, 4);
}

static sf_tensor_ref inception_b(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x) {
    sf_tensor_ref br[3];
    br[0] = basic_sq(b, pfx, "branch3x3", x, 384, 3, 2, 0);
    br[1] = basic_sq(b, pfx, "branch3x3dbl_1", x, 64, 1, 1, 1);
    br[1] = basic_sq(b, pfx, "branch3x3dbl_2", br[1], 96, 3, 1, 1);
    br[1] = basic_sq(b, pfx, "branch3x3dbl_3", br[1], 96, 3, 2, 0);
    br[2] = sf_zoo_maxpool(b, sf_zoo_name(b, "%s.branch_pool.maxpool", pfx), x, 3, 2, 0);
    return concat(b, pfx, br, 3);
}

static sf_tensor_ref inception_c(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x,
                                 int64_t c7) {
    sf_tensor_ref br[4];
    br[0] = basic_sq(b, pfx, "branch1x1", x, 192, 1, 1, 1);
    br[1] = basic_sq(b, pfx, "branch7x7_1", x, c7, 1, 1, 1);
    br[1] = basic_1xn(b, pfx, "branch7x7_2", br[1], c7, 7);
    br[1] = basic_nx1(b, pfx, "branch7x7_3", br[1], 192, 7);
    br[2] = basic_sq(b, pfx, "branch7x7dbl_1", x, c7, 1, 1, 1);
    br[2] = basic_nx1(b, pfx, "branch7x7dbl_2", br[2], c7, 7);
    br[2] = basic_1xn(b, pfx, "branch7x7dbl_3", br[2], c7, 7);
    br[2] = basic_nx1(b, pfx, "branch7x7dbl_4", br[2], c7, 7);
    br[2] = basic_1xn(b, pfx, "branch7x7dbl_5", br[2], 192, 7);
    br[3] = pool_branch(b, pfx, x, 192);
    return concat(b, pfx, br, 4);
}

static sf_tensor_ref inception_d(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x) {
    sf_tensor_ref br[3];
    br[0] = basic_sq(b, pfx, "branch3x3_1", x, 192, 1, 1, 1);
    br[0] = basic_sq(b, pfx, "branch3x3_2", br[0], 320, 3, 2, 0);
    br[1] = basic_sq(b, pfx, "branch7x7x3_1", x, 192, 1, 1, 1);
    br[1] = basic_1xn(b, pfx, "branch7x7x3_2", br[1], 192, 7);
    br[1] = basic_nx1(b, pfx, "branch7x7x3_3", br[1], 192, 7);
    br[1] = basic_sq(b, pfx, "branch7x7x3_4", br[1], 192, 3, 2, 0);
    br[2] = sf_zoo_maxpool(b, sf_zoo_name(b, "%s.branch_pool.maxpool", pfx), x, 3, 2, 0);
    return concat(b, pfx, br, 3);
}

static sf_tensor_ref inception_e(sf_zoo_builder *b, const char *pfx, sf_tensor_ref x) {
    sf_tensor_ref br[4], pair[2];
    char name[SF_ZOO_NAME_MAX];
    br[0] = basic_sq(b, pfx, "branch1x1", x, 320, 1, 1, 1);

    sf_tensor_ref t = basic_sq(b, pfx, "branch3x3_1", x, 384, 1, 1, 1);
    pair[0] = basic_1xn(b, pfx, "branch3x3_2a", t, 384, 3);
    pair[1] = basic_nx1(b, pfx, "branch3x3_2b", t, 384, 3);
    snprintf(name, sizeof name, "%s.branch3x3", pfx);
    br[1] = concat(b, name, pair, 2);

    t = basic_sq(b, pfx, "branch3x3dbl_1", x, 448, 1, 1, 1);
    t = basic_sq(b, pfx, "branch3x3dbl_2", t, 384, 3, 1, 1);
    pair[0] = basic_1xn(b, pfx, "branch3x3dbl_3a", t, 384, 3);
    pair[1] = basic_nx1(b, pfx, "branch3x3dbl_3b", t, 384, 3);
    snprintf(name, sizeof name, "%s.branch3x3dbl", pfx);
    br[2] = concat(b, name, pair, 2);

    br[3] = pool_branch(b, pfx, x, 192);
    return concat(b, pfx, br, 4);
}

sf_graph *sf_zoo_inception_v3(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "inception_v3", err) != SF_OK) return NULL;
    sf_tensor_ref x = sf_zoo_input(b, "input", 4, (int64_t[]){o->batch, 3, 299, 299}, 0);
    x = basic_sq(b, NULL, "Conv2d_1a_3x3", x, 32, 3, 2, 0);  /* 149x149 */
    x = basic_sq(b, NULL, "Conv2d_2a_3x3", x, 32, 3, 1, 0);  /* 147x147 */
    x = basic_sq(b, NULL, "Conv2d_2b_3x3", x, 64, 3, 1, 1);  /* 147x147 */
    x = sf_zoo_maxpool(b, "maxpool1", x, 3, 2, 0);           /* 73x73 */
    x = basic_sq(b, NULL, "Conv2d_3b_1x1", x, 80, 1, 1, 1);  /* 73x73 */
    x = basic_sq(b, NULL, "Conv2d_4a_3x3", x, 192, 3, 1, 0); /* 71x71 */
    x = sf_zoo_maxpool(b, "maxpool2", x, 3, 2, 0);           /* 35x35 */
    x = inception_a(b, "Mixed_5b", x, 32);                   /* 256 channels */
    x = inception_a(b, "Mixed_5c", x, 64);                   /* 288 */
    x = inception_a(b, "Mixed_5d", x, 64);                   /* 288 */
    x = inception_b(b, "Mixed_6a", x);                       /* 768 at 17x17 */
    x = inception_c(b, "Mixed_6b", x, 128);
    x = inception_c(b, "Mixed_6c", x, 160);
    x = inception_c(b, "Mixed_6d", x, 160);
    x = inception_c(b, "Mixed_6e", x, 192);
    x = inception_d(b, "Mixed_7a", x);                       /* 1280 at 8x8 */
    x = inception_e(b, "Mixed_7b", x);                       /* 2048 */
    x = inception_e(b, "Mixed_7c", x);                       /* 2048 */
    x = sf_zoo_adaptive_avgpool(b, "avgpool", x, 1, 1);
    x = sf_zoo_dropout(b, "dropout", x, 0.5);
    x = sf_zoo_flatten(b, "flatten", x);
    x = sf_zoo_linear(b, "fc", x, 1000, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}
