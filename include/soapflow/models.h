/*
 * soapflow/models.h - the built-in model zoo.
 *
 *     sf_model_options o;
 *     sf_model_options_default(&o);
 *     o.batch = 256;
 *     sf_graph *g = sf_model_build("resnet50", &o, &err);
 *
 * CNNs follow torchvision's definitions layer for layer (same trainable
 * parameter count); RNNs are unrolled with time steps exposed as operators
 * (chunks of `chunk` steps) so that layers and steps can be placed apart.
 * The GPTs (gpt, gpt2 ... gpt2-xl, gpt3) count as many parameters as the
 * published models.
 */
#ifndef SOAPFLOW_MODELS_H
#define SOAPFLOW_MODELS_H

#include "soapflow/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_MLP_MAX_LAYERS 16

typedef struct sf_model_options {
    int64_t batch;   /* global batch; must be >= 1 */
    int64_t seq_len; /* RNN unrolled steps / transformer sequence (0: model default) */
    int64_t chunk;   /* RNN steps per operator (0: default 4) */
    int64_t hidden;  /* RNN hidden/embedding size (0: model default) */
    int64_t vocab;   /* vocabulary (0: model default) */
    int64_t layers;  /* gpt: transformer blocks (0: model default) */
    int64_t heads;   /* gpt: attention heads, dividing hidden (0: model default) */
    int n_mlp;       /* mlp: number of sizes in mlp_sizes (input, hidden..., classes) */
    int64_t mlp_sizes[SF_MLP_MAX_LAYERS + 1];
} sf_model_options;

SF_API void
sf_model_options_default(sf_model_options *o); /* batch 64, everything else model default */

/* The options a zoo model reads besides batch (sf_model_options_taken); the
 * builders ignore the others, so that one options struct can serve every model. */
enum {
    SF_MODEL_OPT_SEQ_LEN = 1u << 0,
    SF_MODEL_OPT_CHUNK = 1u << 1,
    SF_MODEL_OPT_HIDDEN = 1u << 2,
    SF_MODEL_OPT_VOCAB = 1u << 3,
    SF_MODEL_OPT_MLP_SIZES = 1u << 4,
    SF_MODEL_OPT_LAYERS = 1u << 5,
    SF_MODEL_OPT_HEADS = 1u << 6,
};
/* The SF_MODEL_OPT_* a zoo model reads; 0 for one that reads none, or an
 * unknown name. */
SF_API unsigned sf_model_options_taken(const char *name);

SF_API int sf_model_count(void);
SF_API const char *sf_model_name(int i);
SF_API const char *sf_model_summary(int i); /* one line: what it is and its defaults */
/* Build a zoo model; SF_ERR_NOTFOUND (with the list of names) when unknown. */
SF_API sf_graph *sf_model_build(const char *name, const sf_model_options *o, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
