/*
 * cmd_train.c - `soapflow train`: train a model with a strategy on MPI ranks,
 * one rank per device of the strategy, and put the measured iteration time
 * beside the simulator's prediction for the same strategy and machine.
 *
 *     mpirun -n 2 soapflow train --model lenet5 --strategy data --epochs 1
 *
 * Every rank parses the same command line and builds the same model, machine
 * and strategy; every check that can fail runs on every rank before any
 * training, and the ranks agree on the outcome (sf_comm_agree), so a bad
 * strategy or file stops all of them with one message, printed by rank 0.
 * Other ranks keep quiet: their standard error goes to /dev/null once MPI is
 * up, and what they have to say reaches rank 0 through the agreement.
 *
 * Data: Fashion-MNIST (the default for models that read 1x28x28 or 784
 * inputs into 10 classes), MNIST, or synthetic batches for any model. Every
 * rank holds the dataset and takes, per step, the global batch of the epoch's
 * seeded order (sf_data_shuffle); the runtime gives each part its tile.
 * Checkpoints are safetensors files of the full-layout weights (`<op>.<param>`,
 * PyTorch's names and shapes), written by rank 0 after gathering the shards;
 * --save also stores the optimizer's state (SGD's "<op>.<param>.momentum",
 * Adam's "<op>.<param>.exp_avg" and ".exp_avg_sq", PyTorch's names) and, in the
 * metadata, the step (Adam's step count), the seed, the data position and an
 * optimizer other than SGD, so --resume continues exactly where the run
 * stopped, bit for bit; --save-every writes the same as it goes. A
 * checkpoint is input like any other: its numbers are range-checked before
 * they index the data order or add to a step count.
 */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/data.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/safetensors.h"
#include "soapflow/sim.h"
#include "soapflow/stats.h"

#define DEFAULT_STRATEGY "data"
#define MAX_STEPS ((int64_t)1 << 40)

static int usage(FILE *out) {
    fprintf(
        out,
        "usage: mpirun -n P soapflow train --model NAME|FILE [options]\n"
        "\n"
        "Train a model with a strategy on P MPI ranks, one rank per device of the\n"
        "strategy's machine, with the real kernels, messages and all-reduces. Prints the\n"
        "loss as it goes, the measured iteration time (median after warm-up) beside the\n"
        "simulator's prediction for the same strategy and machine, the memory a rank\n"
        "reserved and its peak used beside the simulator's peak for that device (its\n"
        "memory timeline, counted as this runtime holds memory), and, for image\n"
        "classification data, the test accuracy. Without mpirun it runs as one rank.\n"
        "\n"
        "options:\n"
        "%s"
        "  --machine NAME|FILE    the machine the strategy is planned for; it must have P\n"
        "                         devices (default: cpu[P], the cpu preset's P ranks)\n"
        "  -s, --strategy S       data, model, owt, expert, single, megatron[:T],\n"
        "                         megatron-sp[:T], megatron:tp=T,pp=P,dp=D,mb=B,schedule=S,\n"
        "                         fsdp, zero1-3 (options as in simulate --help), or a\n"
        "                         strategy file\n"
        "                         (default data)\n"
        "  --data D               fashion-mnist, mnist or synthetic (default: fashion-mnist\n"
        "                         for models of 1x28x28 or 784 inputs and 10 classes,\n"
        "                         else synthetic)\n"
        "  --data-dir DIR         folder holding the dataset's IDX files\n"
        "  --epochs E             passes over the training data (default 1)\n"
        "  --iters N              steps instead of epochs (synthetic data: default 100)\n"
        "  --lr-schedule S        constant (default) or cosine: lr * (1 + cos(pi t / T)) / 2\n"
        "                         at step t, and 0 from step T on\n"
        "  --lr-steps T           the cosine schedule's length in steps (default: the\n"
        "                         checkpoint's for --resume, else the run's last step), so\n"
        "                         that a run cut into pieces follows one schedule\n"
        "  --optimizer O          sgd (default), adam or adamw (PyTorch's formulas;\n"
        "                         docs/runtime.md)\n"
        "  --lr X                 learning rate (default 0.01; adam and adamw 0.001)\n"
        "  --momentum X           SGD momentum (default 0.9)\n"
        "  --beta1 X, --beta2 X   Adam's decay rates of its moments (default 0.9, 0.999)\n"
        "  --eps X                Adam's term of the denominator (default 1e-8)\n"
        "  --weight-decay X       L2 weight decay added to the gradient (sgd, adam; default\n"
        "                         0), decoupled for adamw (default 0.01)\n"
        "  --seed S               initial weights, data order and dropout (default 1)\n"
        "  --init F.safetensors   initial weights from a checkpoint (names and shapes checked);\n"
        "                         an ONNX model starts from its initializers when it has them\n"
        "  --save F.safetensors   write the trained weights (and optimizer state, step) at\n"
        "                         the end\n"
        "  --save-every N         also write --save every N steps (atomically: a killed run\n"
        "                         keeps its last checkpoint)\n"
        "  --resume F             continue a run saved with --save: weights, optimizer\n"
        "                         state, step and data order (the same --optimizer)\n"
        "  --trace FILE           Chrome trace of one measured iteration (the tracks and\n"
        "                         task names of 'simulate --trace')\n"
        "  --costs FILE           task costs for the prediction (soapflow profile)\n"
        "  --dtype fp32           the runtime computes in fp32 on CPU: other dtypes are\n"
        "                         refused (plan them with simulate or search)\n"
        "  --sync overlap|bulk    when gradient syncs start (default overlap)\n"
        "  --sync-scheme S        ring (default), ps or hierarchical: how a weight's\n"
        "                         replicas combine their gradients, the task graph's\n"
        "                         steps of the scheme (docs/runtime.md)\n"
        "  --log-every N          steps between loss lines (default: about 10 per epoch)\n"
        "  --reference-kernels    the plain reference kernels instead of the fast ones\n"
        "  --json                 print a JSON summary instead of the report (per rank:\n"
        "                         reserved_bytes, peak_bytes, predicted_peak_bytes)\n"
        "  -h, --help             this help\n"
        "\n"
        "The default batch is 64 a rank: every command's default is 64 per device of its\n"
        "machine, so that profile, simulate, validate and train without --batch see the\n"
        "same tasks.\n"
        "\n"
        "As root, OpenMPI needs OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;\n"
        "more ranks than cores need OMPI_MCA_rmaps_base_oversubscribe=1.\n",
        sf_cli_model_help);
    return SF_EXIT_OK;
}

typedef struct train_opts {
    sf_cli_model_opts model;
    const char *machine, *strategy, *data, *data_dir, *init, *save, *resume, *trace, *costs;
    const char *sync, *schedule;
    sf_sync_scheme scheme;
    int64_t epochs, iters, seed, log_every, save_every, lr_steps;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    sf_optimizer_kind optimizer;
    int json, reference, help;
    sf_dtype dtype;
} train_opts;

static int parse_scheme(sf_cli_args *a, sf_sync_scheme *out) {
    const char *v;
    if (!sf_cli_str(a, "--sync-scheme", NULL, &v)) return 0;
    if (v && sf_sync_scheme_parse(v, out) != 0) {
        sf_cli_usage_error(a->cmd, "--sync-scheme must be ring, ps or hierarchical, not '%.64s'",
                           v);
        a->status = SF_EXIT_USAGE;
    }
    return 1;
}

static int parse(int argc, char **argv, train_opts *o) {
    memset(o, 0, sizeof *o);
    o->strategy = DEFAULT_STRATEGY;
    /* NaN: not given, the optimizer's default (sf_optimizer_default) */
    o->lr = o->momentum = o->weight_decay = o->beta1 = o->beta2 = o->eps = NAN;
    o->seed = 1;
    o->sync = "overlap";
    o->scheme = SF_SCHEME_RING;
    o->schedule = "constant";
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) {
            o->help = 1;
            return SF_EXIT_OK;
        }
        if (sf_cli_model_option(&a, &o->model) || sf_cli_str(&a, "--machine", NULL, &o->machine) ||
            sf_cli_str(&a, "--strategy", "-s", &o->strategy) ||
            sf_cli_str(&a, "--data", NULL, &o->data) ||
            sf_cli_str(&a, "--data-dir", NULL, &o->data_dir) ||
            sf_cli_int(&a, "--epochs", NULL, 1, 1000000, &o->epochs) ||
            sf_cli_int(&a, "--iters", NULL, 1, MAX_STEPS, &o->iters) ||
            sf_cli_double(&a, "--lr", 0, 1e6, &o->lr) ||
            sf_cli_double(&a, "--momentum", 0, 1, &o->momentum) ||
            sf_cli_double(&a, "--weight-decay", 0, 1e6, &o->weight_decay) ||
            sf_cli_double(&a, "--beta1", 0, 0.999999, &o->beta1) ||
            sf_cli_double(&a, "--beta2", 0, 0.999999, &o->beta2) ||
            sf_cli_double(&a, "--eps", 1e-30, 1, &o->eps) ||
            sf_cli_optimizer_option(&a, &o->optimizer) ||
            sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &o->seed) ||
            sf_cli_str(&a, "--init", NULL, &o->init) || sf_cli_str(&a, "--save", NULL, &o->save) ||
            sf_cli_str(&a, "--resume", NULL, &o->resume) ||
            sf_cli_str(&a, "--trace", NULL, &o->trace) ||
            sf_cli_str(&a, "--costs", NULL, &o->costs) || sf_cli_dtype_option(&a, &o->dtype) ||
            sf_cli_str(&a, "--sync", NULL, &o->sync) || parse_scheme(&a, &o->scheme) ||
            sf_cli_str(&a, "--lr-schedule", NULL, &o->schedule) ||
            sf_cli_int(&a, "--log-every", NULL, 1, MAX_STEPS, &o->log_every) ||
            sf_cli_int(&a, "--save-every", NULL, 1, MAX_STEPS, &o->save_every) ||
            sf_cli_int(&a, "--lr-steps", NULL, 1, MAX_STEPS, &o->lr_steps) ||
            sf_cli_flag(&a, "--reference-kernels", NULL, &o->reference) ||
            sf_cli_flag(&a, "--json", NULL, &o->json))
            continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!o->model.model) return sf_cli_usage_error("train", "--model is required");
    if (o->dtype != SF_DTYPE_FP32)
        return sf_cli_usage_error("train",
                                  "--dtype %s: the runtime trains in fp32 on CPU (its kernels are "
                                  "fp32 only); plan a %s run with simulate or search",
                                  sf_dtype_name(o->dtype), sf_dtype_name(o->dtype));
    if (o->epochs && o->iters)
        return sf_cli_usage_error("train", "--epochs and --iters exclude each other");
    int sgd = o->optimizer == SF_OPTIMIZER_SGD;
    if (sgd && (!isnan(o->beta1) || !isnan(o->beta2) || !isnan(o->eps)))
        return sf_cli_usage_error("train", "--beta1, --beta2 and --eps are Adam's: add --optimizer "
                                           "adam or adamw");
    if (!sgd && !isnan(o->momentum))
        return sf_cli_usage_error("train", "--momentum is SGD's; %s has --beta1 and --beta2",
                                  sf_optimizer_name(o->optimizer));
    sf_optimizer def;
    sf_optimizer_default(&def, o->optimizer);
    if (isnan(o->lr)) o->lr = def.lr;
    if (isnan(o->momentum)) o->momentum = def.momentum;
    if (isnan(o->weight_decay)) o->weight_decay = def.weight_decay;
    if (isnan(o->beta1)) o->beta1 = def.beta1;
    if (isnan(o->beta2)) o->beta2 = def.beta2;
    if (isnan(o->eps)) o->eps = def.eps;
    if (o->init && o->resume)
        return sf_cli_usage_error("train", "--init and --resume exclude each other");
    if (o->save_every && !o->save)
        return sf_cli_usage_error("train", "--save-every needs --save FILE");
    if (strcmp(o->sync, "overlap") && strcmp(o->sync, "bulk"))
        return sf_cli_usage_error("train", "--sync is overlap or bulk, got '%.64s'", o->sync);
    if (strcmp(o->schedule, "constant") && strcmp(o->schedule, "cosine"))
        return sf_cli_usage_error("train", "--lr-schedule is constant or cosine, got '%.64s'",
                                  o->schedule);
    if (o->lr_steps && strcmp(o->schedule, "cosine"))
        return sf_cli_usage_error("train", "--lr-steps is the length of --lr-schedule cosine");
    if (o->data && strcmp(o->data, "fashion-mnist") && strcmp(o->data, "mnist") &&
        strcmp(o->data, "synthetic"))
        return sf_cli_usage_error(
            "train", "--data is fashion-mnist, mnist or synthetic, got '%.64s'", o->data);
    return SF_EXIT_OK;
}

/* ---- data ----------------------------------------------------------------------- */

/* The operators the dataset feeds: one image input of 784 elements a sample
 * and one softmax_ce of 10 classes over (N) rows. -1s when the model does not
 * take such data. */
static void image_model(const sf_graph *g, int *input, int *loss) {
    *input = *loss = -1;
    int n_in = 0, n_loss = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type == SF_OP_INPUT) {
            n_in++;
            const sf_shape *s = &op->out_shapes[0];
            if (!op->params.input.is_index && sf_shape_numel(s) == s->d[0] * 784) *input = i;
        } else if (op->type == SF_OP_SOFTMAX_CE) {
            n_loss++;
            const sf_shape *s = &op->out_shapes[0];
            if (s->ndim == 2 && s->d[1] == 10) *loss = i;
        }
    }
    if (n_in != 1 || n_loss != 1 || *input < 0 || *loss < 0) *input = *loss = -1;
}

/* The dataset's images against what the model's input reads a sample: the
 * same pixels, (1, h, w) for an image input or h * w values for a flat one.
 * fill_batch copies a sample's worth of the model's input from each image, so
 * any other size would read past the images or train on misaligned pixels. */
static int check_images(const sf_graph *g, int input, const sf_dataset *ds) {
    const sf_shape *s = &sf_graph_op(g, input)->out_shapes[0];
    int fits = s->ndim == 4 ? ds->c == s->d[1] && ds->h == s->d[2] && ds->w == s->d[3]
                            : ds->c * ds->h * ds->w == sf_shape_numel(s) / s->d[0];
    if (fits) return SF_EXIT_OK;
    char want[64];
    if (s->ndim == 4)
        snprintf(want, sizeof want, "%lldx%lldx%lld", (long long)s->d[1], (long long)s->d[2],
                 (long long)s->d[3]);
    else
        snprintf(want, sizeof want, "%lld values", (long long)(sf_shape_numel(s) / s->d[0]));
    return sf_cli_fail("train: %s: %lld images of %lldx%lld, but %s reads %s a sample",
                       ds->images_path, (long long)ds->n, (long long)ds->h, (long long)ds->w,
                       sf_graph_name(g), want);
}

static void fill_batch(sf_batch_bufs *bb, const sf_dataset *ds, const int64_t *order, int64_t first,
                       int64_t batch, int input, int loss) {
    /* c * h * w floats a sample: what the model reads (check_images) */
    sf_dataset_batch(ds, order, first, batch, bb->inputs[input], bb->labels[loss]);
}

/* ---- checkpoints ---------------------------------------------------------------- */

/* What a checkpoint holds of the run: its passes over the operators, in file
 * order (SGD's files are what they were before Adam: weights, momentum,
 * buffers), and the suffix of each pass's tensor names. */
enum { PASS_WEIGHTS, PASS_STATE0, PASS_BUFFERS, PASS_STATE1, N_PASSES };

/* The tensor-name suffix of pass p under optimizer k: PyTorch's state names
 * (SGD's momentum_buffer shortened to soapflow's ".momentum", as it was). */
static const char *pass_suffix(int p, sf_optimizer_kind k) {
    if (p == PASS_STATE0) return k == SF_OPTIMIZER_SGD ? ".momentum" : ".exp_avg";
    if (p == PASS_STATE1) return ".exp_avg_sq";
    return "";
}

/* "<op>.<param><suffix>", malloc'd (NULL when out of memory): operator names
 * have no length limit, so neither have these. */
static char *tensor_name(const char *op, const char *param, const char *suffix) {
    size_t n = strlen(op) + 1 + strlen(param) + strlen(suffix) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s.%s%s", op, param, suffix);
    return s;
}

/* Write the gathered weights (and optimizer state: v, and v2 under Adam) of g
 * as safetensors, on rank 0, with the buffers b (batch norm's running
 * statistics, "<op>.running_mean" and "<op>.running_var" as in PyTorch's
 * state_dict) when b is not NULL. */
static sf_status save_checkpoint(const char *path, const sf_graph *g, sf_optimizer_kind opt,
                                 float **w, float **v, float **v2, float **b, int64_t step,
                                 int64_t seed, int64_t lr_steps, sf_error *err) {
    int n = sf_graph_num_ops(g), cap = 0;
    for (int i = 0; i < n; i++) cap += N_PASSES * SF_MAX_PARAMS;
    sf_st_tensor *t = calloc((size_t)(cap ? cap : 1), sizeof *t);
    char **names = calloc((size_t)(cap ? cap : 1), sizeof *names);
    sf_status st = t && names ? SF_OK : SF_ERR_NOMEM;
    int nt = 0;
    for (int pass = 0; pass < N_PASSES && st == SF_OK; pass++) {
        float **src = pass == PASS_WEIGHTS  ? w
                      : pass == PASS_STATE0 ? v
                      : pass == PASS_STATE1 ? (v ? v2 : NULL)
                                            : b;
        for (int i = 0; src && i < n && st == SF_OK; i++) {
            if (!src[i]) continue;
            const sf_op *op = sf_graph_op(g, i);
            sf_param_desc d[SF_MAX_PARAMS];
            int np = pass == PASS_BUFFERS ? sf_buffer_descs(op, d) : sf_op_param_descs(op, d);
            for (int k = 0; k < np; k++) {
                names[nt] = tensor_name(op->name, d[k].name, pass_suffix(pass, opt));
                if (!names[nt]) {
                    st = SF_ERR_NOMEM;
                    break;
                }
                t[nt].name = names[nt];
                t[nt].ndim = d[k].shape.ndim;
                for (int q = 0; q < d[k].shape.ndim; q++) t[nt].shape[q] = d[k].shape.d[q];
                t[nt].numel = sf_shape_numel(&d[k].shape);
                t[nt].data = src[i] + d[k].offset;
                nt++;
            }
        }
    }
    if (st == SF_OK) {
        char step_s[32], seed_s[32], lr_s[32];
        snprintf(step_s, sizeof step_s, "%lld", (long long)step);
        snprintf(seed_s, sizeof seed_s, "%lld", (long long)seed);
        snprintf(lr_s, sizeof lr_s, "%lld", (long long)lr_steps);
        const char *keys[6] = {"format", "soapflow.model", "soapflow.step", "soapflow.seed"};
        const char *vals[6] = {"pt", sf_graph_name(g), step_s, seed_s};
        size_t n_meta = v ? 4 : 2;
        /* a schedule's T only when there is one (lr_steps > 0), so that a constant
         * rate's checkpoints do not depend on how a run was cut; the optimizer
         * when it is not SGD (an SGD checkpoint is what it was before Adam) */
        if (v && lr_steps > 0) {
            keys[n_meta] = "soapflow.lr_steps";
            vals[n_meta++] = lr_s;
        }
        if (v && opt != SF_OPTIMIZER_SGD) {
            keys[n_meta] = "soapflow.optimizer";
            vals[n_meta++] = sf_optimizer_name(opt);
        }
        st = sf_safetensors_write(path, t, (size_t)nt, keys, vals, n_meta, err);
    } else {
        sf_error_set(err, st, "out of memory");
    }
    for (int i = 0; names && i < nt; i++) free(names[i]);
    free(t);
    free(names);
    return st;
}

/* The integer of metadata key in [lo, hi] into *out: SF_OK, or a message
 * naming the file and the key. A key that is not there is an error when
 * required, else leaves *out alone. */
static sf_status meta_int(const sf_st_file *f, const char *path, const char *key, int64_t lo,
                          int64_t hi, int required, int64_t *out, sf_error *err) {
    const char *s = sf_safetensors_meta(f, key);
    if (!s && !required) return SF_OK;
    if (!s)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: no metadata '%s': not a checkpoint saved by 'train --save'", path,
                            key);
    if (sf_cli_parse_int(s, lo, hi, out) != 0)
        return sf_error_set(err, SF_ERR_RANGE,
                            "%s: metadata '%s' is '%.40s', expected an integer from %lld to %lld",
                            path, key, s, (long long)lo, (long long)hi);
    return SF_OK;
}

/* Load weights (and optimizer state, for a resume: v, and v2 under Adam) into
 * w, v and v2 from a checkpoint: every tensor of the model must be there with
 * its shape; mismatches are listed. A resume's checkpoint must have been saved
 * by the same optimizer (its metadata 'soapflow.optimizer', sgd when absent):
 * another's state would be read as this one's.
 * The numbers of a resume's metadata are checked against what the run does
 * with them: a step indexes the data order and adds to the steps to run, so it
 * is bounded by MAX_STEPS (the caller checks the sum); a schedule's length
 * divides. The buffers b (batch norm's running statistics) are loaded too, but may be
 * missing altogether (a checkpoint of an older soapflow): then b keeps its
 * initial values and a warning says so. */
static sf_status load_checkpoint(const char *path, const sf_graph *g, sf_optimizer_kind opt,
                                 float **w, float **v, float **v2, float **b, int64_t *step,
                                 int64_t *seed, int64_t *lr_steps, sf_error *err) {
    sf_st_file *f = sf_safetensors_read(path, err);
    if (!f) return err->code ? err->code : SF_ERR_IO;
    char bad[SF_ERRMSG_MAX] = "";
    int n_bad = 0, n_buf = 0, n_buf_found = 0;
    sf_status st = SF_OK;
    if (v) {
        const char *saved = sf_safetensors_meta(f, "soapflow.optimizer");
        sf_optimizer_kind k = SF_OPTIMIZER_SGD;
        if (saved && sf_optimizer_parse(saved, &k) != 0)
            st = sf_error_set(err, SF_ERR_PARSE,
                              "%s: metadata 'soapflow.optimizer' is '%.40s', expected sgd, adam "
                              "or adamw",
                              path, saved);
        else if (k != opt)
            st = sf_error_set(err, SF_ERR_INVALID,
                              "%s: saved by a run with --optimizer %s, this one has %s: resume "
                              "with --optimizer %s",
                              path, sf_optimizer_name(k), sf_optimizer_name(opt),
                              sf_optimizer_name(k));
    }
    for (int pass = 0; pass < N_PASSES && st == SF_OK; pass++) {
        float **dst = pass == PASS_WEIGHTS  ? w
                      : pass == PASS_STATE0 ? v
                      : pass == PASS_STATE1 ? (v ? v2 : NULL)
                                            : b;
        for (int i = 0; dst && i < sf_graph_num_ops(g) && st == SF_OK; i++) {
            if (!dst[i]) continue;
            const sf_op *op = sf_graph_op(g, i);
            sf_param_desc d[SF_MAX_PARAMS];
            int np = pass == PASS_BUFFERS ? sf_buffer_descs(op, d) : sf_op_param_descs(op, d);
            for (int k = 0; k < np; k++) {
                char *name = tensor_name(op->name, d[k].name, pass_suffix(pass, opt));
                if (!name) {
                    st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
                    break;
                }
                const sf_st_tensor *tp = sf_safetensors_find(f, name);
                if (pass == PASS_BUFFERS) {
                    n_buf++;
                    n_buf_found += tp != NULL;
                    if (!tp) { /* all missing: warned below; some: listed */
                        free(name);
                        continue;
                    }
                }
                int ok = tp && tp->ndim == d[k].shape.ndim;
                for (int q = 0; ok && q < tp->ndim; q++) ok = tp->shape[q] == d[k].shape.d[q];
                if (!ok) {
                    if (n_bad++ < 4)
                        snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%s%.120s",
                                 n_bad > 1 ? ", " : "", name);
                } else {
                    memcpy(dst[i] + d[k].offset, tp->data,
                           (size_t)sf_shape_numel(&d[k].shape) * sizeof(float));
                }
                free(name);
            }
        }
    }
    if (st == SF_OK && n_buf_found && n_buf_found < n_buf && !n_bad) {
        n_bad = n_buf - n_buf_found;
        snprintf(bad, sizeof bad, "running statistics of some batch norms");
    }
    if (st == SF_OK && !n_bad && n_buf && !n_buf_found)
        SF_LOG_WARN_F("%s: no batch norm running statistics (an older checkpoint?): they start "
                      "from mean 0 and variance 1",
                      path);
    if (st != SF_OK) {
        /* out of memory, said */
    } else if (n_bad) {
        st = sf_error_set(err, SF_ERR_SHAPE, "%s: %d tensor%s missing or of another shape: %s%s",
                          path, n_bad, n_bad > 1 ? "s" : "", bad, n_bad > 4 ? ", ..." : "");
    } else if (step || seed) {
        st = meta_int(f, path, "soapflow.step", 0, MAX_STEPS, 1, step, err);
        if (st == SF_OK) st = meta_int(f, path, "soapflow.seed", 0, INT64_MAX, 1, seed, err);
        if (st == SF_OK && lr_steps)
            st = meta_int(f, path, "soapflow.lr_steps", 1, MAX_STEPS, 0, lr_steps, err);
    }
    sf_safetensors_free(f);
    return st;
}

/* ---- the command ---------------------------------------------------------------- */

typedef struct train_state {
    train_opts o;
    sf_comm *comm;
    int rank, ranks;
    sf_graph *g;
    sf_machine *m;
    sf_strategy *s;
    sf_runtime *rt;
    sf_dataset train, test;
    int input, loss;
    sf_batch_bufs *bb;
    float **w, **v, **b; /* weights, momentum, buffers (batch norm's running statistics) */
    float **v2;          /* Adam's second moment; NULL under SGD */
    int64_t *order;
    double predicted_s;
    double *predicted_peak; /* [ranks] each device's peak on the simulator's memory timeline */
} train_state;

/* Everything that can fail before training, on every rank alike. */
static int setup(train_state *t, sf_error *err) {
    const train_opts *o = &t->o;
    /* an ONNX file's initializers, when it has them all, are the initial weights
     * (sf_params_new's layout; --init and --resume overwrite them) */
    /* the default batch is every command's: 64 a device, here a rank, so that
     * profile, simulate and validate on the same machine see the same tasks */
    int rc = sf_cli_model_open_weights("train", &o->model, t->ranks, &t->g, &t->w);
    if (rc != SF_EXIT_OK) return rc;
    t->m = sf_cli_rank_machine("train", o->machine, t->ranks);
    if (!t->m) return SF_EXIT_FAIL;
    if (sf_machine_num_devices(t->m) != t->ranks)
        return sf_cli_fail("train: machine %s has %d devices, but there are %d ranks: run "
                           "'mpirun -n %d' or give a machine of %d devices",
                           sf_machine_name(t->m), sf_machine_num_devices(t->m), t->ranks,
                           sf_machine_num_devices(t->m), t->ranks);
    rc = sf_cli_strategy_open(o->strategy, t->g, t->m, &t->s);
    if (rc != SF_EXIT_OK) return rc;
    if (o->save && sf_write_file_check(o->save, err) != SF_OK) return sf_cli_fail_err(err);
    if (o->trace && sf_write_file_check(o->trace, err) != SF_OK) return sf_cli_fail_err(err);

    /* data */
    image_model(t->g, &t->input, &t->loss);
    const char *data = o->data ? o->data : t->input >= 0 ? "fashion-mnist" : "synthetic";
    t->o.data = data;
    if (strcmp(data, "synthetic")) {
        if (t->input < 0)
            return sf_cli_fail("train: --data %s needs a model with one input of 784 values a "
                               "sample (1x28x28) and 10 classes; %s is not one (use --data "
                               "synthetic)",
                               data, sf_graph_name(t->g));
        if (sf_dataset_load(data, "train", o->data_dir, &t->train, err) != SF_OK ||
            sf_dataset_load(data, "test", o->data_dir, &t->test, err) != SF_OK)
            return sf_cli_fail_err(err);
        if ((rc = check_images(t->g, t->input, &t->train)) != SF_EXIT_OK ||
            (rc = check_images(t->g, t->input, &t->test)) != SF_EXIT_OK)
            return rc;
        int64_t batch = sf_graph_op(t->g, t->input)->out_shapes[0].d[0];
        if (batch > t->train.n)
            return sf_cli_fail("train: batch %lld exceeds the %lld training samples",
                               (long long)batch, (long long)t->train.n);
        t->order = malloc((size_t)t->train.n * sizeof *t->order);
        if (!t->order) return sf_cli_fail("out of memory");
    }
    t->bb = sf_batch_bufs_new(t->g, err);
    if (!t->w) t->w = sf_params_new(t->g, (uint64_t)o->seed, 0, err);
    t->v = sf_params_new(t->g, 0, 1, err);
    int adam = o->optimizer != SF_OPTIMIZER_SGD;
    if (adam) t->v2 = sf_params_new(t->g, 0, 1, err);
    t->b = sf_buffers_new(t->g, err);
    if (!t->bb || !t->w || !t->v || (adam && !t->v2) || !t->b) return sf_cli_fail_err(err);
    return SF_EXIT_OK;
}

/* The simulator's prediction for the strategy on the machine. */
static int predict(train_state *t, sf_error *err) {
    sf_cost_model *cm = NULL;
    int rc = sf_cli_cost_model_open(t->m, t->o.costs, SF_DTYPE_FP32, t->o.optimizer, &cm);
    if (rc != SF_EXIT_OK) return rc;
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.sync = strcmp(t->o.sync, "bulk") ? SF_SYNC_OVERLAP : SF_SYNC_BULK;
    so.scheme = t->o.scheme;
    so.memory_timeline = 1; /* memory as the schedule lives it, */
    so.runtime_memory = 1;  /* and as this runtime holds it */
    sf_sim *sim = sf_sim_new(t->g, t->m, cm, &so, err);
    sf_sim_result r;
    if (!sim || sf_sim_run(sim, t->s, &r, err) != SF_OK) {
        sf_sim_free(sim);
        sf_cost_free(cm);
        return sf_cli_fail_err(err);
    }
    t->predicted_s = r.iter_s;
    t->predicted_peak = calloc((size_t)t->ranks, sizeof *t->predicted_peak);
    if (!t->predicted_peak) {
        sf_sim_free(sim);
        sf_cost_free(cm);
        return sf_cli_fail("out of memory");
    }
    for (int d = 0; d < t->ranks && d < r.n_devices; d++)
        t->predicted_peak[d] = r.device_live_bytes ? r.device_live_bytes[d] : r.peak_mem_bytes;
    sf_cli_cost_model_report(cm); /* simulate's warning when the costs file misses tasks */
    sf_sim_free(sim);
    sf_cost_free(cm);
    return SF_EXIT_OK;
}

/* Gather every rank's events of the last step on rank 0 and write the trace
 * there (validate writes its measured traces with it too). */
static void state_free(train_state *t) {
    free(t->predicted_peak);
    sf_runtime_free(t->rt);
    sf_batch_bufs_free(t->bb);
    if (t->g) {
        sf_params_free(t->g, t->w);
        sf_params_free(t->g, t->v);
        if (t->v2) sf_params_free(t->g, t->v2);
        sf_params_free(t->g, t->b);
    }
    free(t->order);
    sf_dataset_free(&t->train);
    sf_dataset_free(&t->test);
    sf_strategy_free(t->s);
    sf_machine_free(t->m);
    sf_graph_free(t->g);
}

/* Test accuracy over the full batches of the test split (the runtime runs
 * batches of the graph's size only). A test split smaller than one batch is
 * not evaluated: *seen is 0 and *acc -1, never an accuracy of nothing. */
static sf_status evaluate(train_state *t, double *acc, int64_t *seen, sf_error *err) {
    int64_t batch = sf_graph_op(t->g, t->input)->out_shapes[0].d[0], ok = 0;
    *seen = 0;
    *acc = -1;
    if (batch > t->test.n) return SF_OK;
    int64_t *ident = malloc((size_t)t->test.n * sizeof *ident);
    if (!ident) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < t->test.n; i++) ident[i] = i;
    int64_t done = 0;
    sf_status st = SF_OK;
    for (; done + batch <= t->test.n && st == SF_OK; done += batch) {
        fill_batch(t->bb, &t->test, ident, done, batch, t->input, t->loss);
        int64_t c = 0;
        st = sf_runtime_eval(t->rt, &t->bb->batch, NULL, &c, err);
        ok += c;
    }
    free(ident);
    *seen = done;
    *acc = (double)ok / (double)done;
    return st;
}

/* Gather the weights and optimizer state on rank 0 and write them there as
 * the checkpoint after `step` steps. Collective: every rank gets the outcome. */
static sf_status checkpoint(train_state *t, int64_t step, int64_t seed, int64_t lr_steps,
                            sf_error *err) {
    sf_status st = sf_runtime_get_params(t->rt, SF_RT_WEIGHTS, t->rank == 0 ? t->w : NULL, err);
    if (st == SF_OK)
        st = sf_runtime_get_params(t->rt, SF_RT_MOMENTUM, t->rank == 0 ? t->v : NULL, err);
    if (st == SF_OK && t->v2)
        st = sf_runtime_get_params(t->rt, SF_RT_SECOND_MOMENT, t->rank == 0 ? t->v2 : NULL, err);
    if (st == SF_OK) st = sf_runtime_get_buffers(t->rt, t->b, err);
    sf_status ws = SF_OK;
    if (st == SF_OK && t->rank == 0)
        ws = save_checkpoint(t->o.save, t->g, t->o.optimizer, t->w, t->v, t->v2, t->b, step, seed,
                             lr_steps, err);
    if (st == SF_OK) st = sf_comm_agree(t->comm, ws, err);
    return st;
}

/* The learning rate of step `step`: constant, or the cosine schedule of
 * lr_steps steps, which stays at 0 after its end (a finished run continued
 * must not climb back). */
static double lr_at(const train_opts *o, int64_t step, int64_t lr_steps) {
    if (strcmp(o->schedule, "cosine")) return o->lr;
    double at = (double)(step < lr_steps ? step : lr_steps);
    return o->lr * 0.5 * (1 + cos(3.14159265358979323846 * at / (double)lr_steps));
}

int sf_cmd_train(int argc, char **argv) {
    train_state t;
    memset(&t, 0, sizeof t);
    int quiet = sf_cli_launcher_rank() > 0;
    int rc = parse(argc, argv, &t.o);
    if (t.o.help) return quiet ? SF_EXIT_OK : usage(stdout);
    if (rc != SF_EXIT_OK) return rc;
    sf_error err = {0};
    if (quiet && !freopen("/dev/null", "w", stderr)) return SF_EXIT_FAIL;
    t.comm = sf_comm_mpi_new(&err);
    if (!t.comm) return sf_cli_fail_err(&err);
    t.rank = sf_comm_rank(t.comm);
    t.ranks = sf_comm_size(t.comm);
    sf_kernels_set_threads(1); /* one BLAS thread per rank */

    rc = setup(&t, &err);
    if (rc == SF_EXIT_OK) rc = predict(&t, &err);
    int64_t step0 = 0, seed = t.o.seed, lr_steps = 0;
    if (rc == SF_EXIT_OK && (t.o.init || t.o.resume)) {
        if (load_checkpoint(t.o.init ? t.o.init : t.o.resume, t.g, t.o.optimizer, t.w,
                            t.o.resume ? t.v : NULL, t.o.resume ? t.v2 : NULL, t.b,
                            t.o.resume ? &step0 : NULL, t.o.resume ? &seed : NULL,
                            t.o.resume ? &lr_steps : NULL, &err) != SF_OK)
            rc = sf_cli_fail_err(&err);
    }
    int synthetic = 0;
    int64_t batch = 0, per_epoch = 0, total = 0;
    if (rc == SF_EXIT_OK) {
        synthetic = strcmp(t.o.data, "synthetic") == 0;
        sf_graph_stats gs;
        sf_graph_stats_compute(t.g, &gs);
        batch = gs.batch;
        per_epoch = synthetic ? 0 : t.train.n / batch;
        total = t.o.iters   ? t.o.iters
                : synthetic ? (t.o.epochs ? t.o.epochs * 100 : 100)
                            : per_epoch * (t.o.epochs ? t.o.epochs : 1);
        /* both are at most MAX_STEPS, so the sum cannot overflow */
        if (step0 + total > MAX_STEPS)
            rc = sf_cli_fail("train: %s: metadata 'soapflow.step' is %lld, and %lld steps more "
                             "pass the %lld steps a run may reach",
                             t.o.resume, (long long)step0, (long long)total, (long long)MAX_STEPS);
    }
    /* all ranks agree that set-up worked before the runtime's collectives */
    sf_error agree = {0};
    if (rc != SF_EXIT_OK) sf_error_set(&agree, SF_ERR_INVALID, "set-up failed on this rank");
    if (sf_comm_agree(t.comm, rc != SF_EXIT_OK ? SF_ERR_INVALID : SF_OK, &agree) != SF_OK) {
        if (rc == SF_EXIT_OK && !quiet) sf_cli_fail_err(&agree);
        state_free(&t);
        sf_comm_free(t.comm);
        return rc != SF_EXIT_OK ? rc : SF_EXIT_FAIL;
    }

    sf_runtime_options ro;
    sf_runtime_options_default(&ro);
    ro.optimizer = t.o.optimizer;
    ro.lr = t.o.lr;
    ro.momentum = t.o.momentum;
    ro.beta1 = t.o.beta1;
    ro.beta2 = t.o.beta2;
    ro.eps = t.o.eps;
    ro.weight_decay = t.o.weight_decay;
    ro.sync = strcmp(t.o.sync, "bulk") ? SF_SYNC_OVERLAP : SF_SYNC_BULK;
    ro.scheme = t.o.scheme;
    ro.machine = t.m;
    ro.fast_kernels = !t.o.reference;
    ro.seed = (uint64_t)seed;
    t.rt = sf_runtime_new(t.g, t.s, t.comm, &ro, &err);
    sf_status st = t.rt ? SF_OK : err.code;
    if (st == SF_OK)
        st = sf_runtime_set_params(t.rt, SF_RT_WEIGHTS, (const float *const *)t.w, &err);
    if (st == SF_OK && t.o.resume)
        st = sf_runtime_set_params(t.rt, SF_RT_MOMENTUM, (const float *const *)t.v, &err);
    if (st == SF_OK && t.o.resume && t.v2)
        st = sf_runtime_set_params(t.rt, SF_RT_SECOND_MOMENT, (const float *const *)t.v2, &err);
    if (st == SF_OK) st = sf_runtime_set_buffers(t.rt, (const float *const *)t.b, &err);
    if (st == SF_OK) sf_runtime_set_steps(t.rt, step0);

    int64_t log_every = t.o.log_every ? t.o.log_every : (total >= 10 ? total / 10 : 1);
    /* the schedule's T: given, else the checkpoint's, else this run's end */
    if (t.o.lr_steps) lr_steps = t.o.lr_steps;
    if (!lr_steps) lr_steps = step0 + total;
    int cosine = strcmp(t.o.schedule, "cosine") == 0;
    double *times = malloc((size_t)(total ? total : 1) * sizeof *times);
    double *losses = malloc((size_t)(total ? total : 1) * sizeof *losses);
    if (!times || !losses) st = sf_error_set(&err, SF_ERR_NOMEM, "out of memory");
    int report = t.rank == 0 && !t.o.json;
    if (report && st == SF_OK)
        printf("%s on %d rank%s (%s), strategy %s, batch %lld, data %s, %lld steps, %s\n",
               sf_graph_name(t.g), t.ranks, t.ranks > 1 ? "s" : "", sf_comm_kind(t.comm),
               t.o.strategy, (long long)batch, t.o.data, (long long)total,
               sf_optimizer_name(t.o.optimizer));
    sf_progress prog;
    if (t.rank == 0 && !t.o.json) sf_progress_start(&prog, stderr, "train", (double)total);
    int64_t epoch_loaded = -1, traced = 0;
    double acc = -1;
    int64_t acc_seen = 0;
    for (int64_t i = 0; i < total && st == SF_OK; i++) {
        int64_t step = step0 + i;
        if (synthetic) {
            sf_batch_synthetic(t.bb, t.g, (uint64_t)seed, step);
        } else {
            int64_t epoch = step / per_epoch;
            if (epoch != epoch_loaded) {
                sf_data_shuffle((uint64_t)seed, (uint64_t)epoch, t.order, t.train.n);
                epoch_loaded = epoch;
            }
            fill_batch(t.bb, &t.train, t.order, (step % per_epoch) * batch, batch, t.input, t.loss);
        }
        if (cosine) sf_runtime_set_lr(t.rt, lr_at(&t.o, step, lr_steps));
        double t0 = sf_now_s(), loss = 0;
        st = sf_runtime_step(t.rt, &t.bb->batch, &loss, &err);
        times[i] = sf_now_s() - t0;
        losses[i] = loss;
        if (st != SF_OK) break;
        /* a diverged run stops here, on every rank alike (the loss is the same
         * on all), before it saves weights full of NaN or reports a time */
        if (!isfinite(loss)) {
            st = sf_error_set(&err, SF_ERR_INVALID,
                              "train: the loss is %s at step %lld: the run diverged (try a "
                              "smaller --lr); nothing saved",
                              sf_cli_non_finite_name(loss), (long long)(step + 1));
            break;
        }
        if (t.o.trace && !traced && (i == total / 2 || i == total - 1)) {
            st = sf_runtime_write_measured_trace(t.comm, t.rt, t.o.trace, t.g, t.m, &err);
            traced = 1;
        }
        if (st == SF_OK && t.o.save_every && (i + 1) % t.o.save_every == 0 && i + 1 < total)
            st = checkpoint(&t, step + 1, seed, cosine ? lr_steps : 0, &err);
        if (t.rank == 0 && !t.o.json) {
            char extra[64];
            snprintf(extra, sizeof extra, "loss %.4f", loss);
            sf_progress_update(&prog, (double)(i + 1), extra);
            if ((i + 1) % log_every == 0 || i + 1 == total)
                fprintf(stdout, "step %6lld  loss %.4f  %.2f ms\n", (long long)(step + 1), loss,
                        times[i] * 1e3);
        }
    }
    if (t.rank == 0 && !t.o.json) sf_progress_finish(&prog);
    if (st == SF_OK && !synthetic) st = evaluate(&t, &acc, &acc_seen, &err);
    if (st == SF_OK && t.o.save)
        st = checkpoint(&t, step0 + total, seed, cosine ? lr_steps : 0, &err);
    /* every rank's reserved and peak bytes, for the report */
    double *peak = calloc((size_t)(2 * t.ranks), sizeof *peak);
    if (st == SF_OK && !peak) st = sf_error_set(&err, SF_ERR_NOMEM, "out of memory");
    if (st == SF_OK) {
        peak[t.rank] = (double)sf_runtime_reserved_bytes(t.rt);
        peak[t.ranks + t.rank] = (double)sf_runtime_peak_bytes(t.rt);
        st = sf_comm_sum(t.comm, peak, 2 * t.ranks);
    }
    if (st != SF_OK) {
        if (t.rank == 0) sf_cli_fail_err(&err);
        rc = SF_EXIT_FAIL;
    } else if (t.rank == 0) {
        char no_acc[160] = "";
        if (!synthetic && acc < 0)
            snprintf(no_acc, sizeof no_acc,
                     "the batch (%lld) is larger than the %lld test samples of %s",
                     (long long)batch, (long long)t.test.n, t.o.data);
        int64_t warm = total > 10 ? total / 10 : (total > 1 ? 1 : 0);
        int64_t nm = total - warm;
        double med = sf_median(times + warm, nm);
        int top = 0; /* the rank with the largest peak */
        for (int r = 1; r < t.ranks; r++)
            if (peak[t.ranks + r] > peak[t.ranks + top]) top = r;
        if (t.o.json) {
            json_t *j = json_object();
            json_object_set_new(j, "model", json_string(sf_graph_name(t.g)));
            json_object_set_new(j, "machine", json_string(sf_machine_name(t.m)));
            json_object_set_new(j, "strategy", json_string(t.o.strategy));
            json_object_set_new(j, "ranks", json_integer(t.ranks));
            json_object_set_new(j, "batch", json_integer(batch));
            json_object_set_new(j, "data", json_string(t.o.data));
            json_object_set_new(j, "optimizer", json_string(sf_optimizer_name(t.o.optimizer)));
            json_object_set_new(j, "steps", json_integer(total));
            sf_cli_json_set_number(j, "loss_first", losses[0]);
            sf_cli_json_set_number(j, "loss_last", losses[total - 1]);
            json_t *ls = json_array();
            for (int64_t i = 0; i < total; i++)
                json_array_append_new(ls, sf_cli_json_number(losses[i]));
            json_object_set_new(j, "losses", ls);
            sf_cli_json_set_number(j, "iter_ms", med * 1e3);
            sf_cli_json_set_number(j, "images_per_s", (double)batch / med);
            sf_cli_json_set_number(j, "predicted_iter_ms", t.predicted_s * 1e3);
            json_t *pk = json_array(), *pu = json_array(), *pp = json_array();
            for (int r = 0; r < t.ranks; r++) {
                json_array_append_new(pk, json_integer((json_int_t)peak[r]));
                json_array_append_new(pu, json_integer((json_int_t)peak[t.ranks + r]));
                json_array_append_new(pp, sf_cli_json_number(t.predicted_peak[r]));
            }
            json_object_set_new(j, "reserved_bytes", pk);
            json_object_set_new(j, "peak_bytes", pu);
            json_object_set_new(j, "predicted_peak_bytes", pp);
            if (!synthetic) {
                /* null, with the reason, when no batch fitted the test split */
                if (acc >= 0)
                    sf_cli_json_set_number(j, "test_accuracy", acc);
                else
                    json_object_set_new(j, "test_accuracy", json_null());
                json_object_set_new(j, "test_samples", json_integer(acc_seen));
                if (acc < 0) json_object_set_new(j, "test_accuracy_note", json_string(no_acc));
            }
            sf_cli_print_json(j);
        } else {
            char b1[32], b2[32], b3[32];
            printf("iteration     measured %.3f ms (median of %lld after %lld warm-up), "
                   "predicted %.3f ms (%+.0f%%)\n",
                   med * 1e3, (long long)nm, (long long)warm, t.predicted_s * 1e3,
                   (t.predicted_s / med - 1) * 100);
            printf("throughput    %.0f images/s\n", (double)batch / med);
            double pred = t.predicted_peak[top];
            printf("memory        rank %d: %s reserved, %s peak used, %s predicted peak "
                   "(%+.0f%%)\n",
                   top, sf_fmt_bytes(peak[top], b1, sizeof b1),
                   sf_fmt_bytes(peak[t.ranks + top], b2, sizeof b2),
                   sf_fmt_bytes(pred, b3, sizeof b3),
                   pred > 0 ? (peak[t.ranks + top] / pred - 1) * 100 : 0.0);
            printf("loss          %.4f -> %.4f\n", losses[0], losses[total - 1]);
            if (acc >= 0)
                printf("test accuracy %.2f%% (%lld samples of %s)\n", acc * 100,
                       (long long)acc_seen, t.o.data);
            else if (!synthetic)
                printf("test accuracy not measured: %s\n", no_acc);
            if (t.o.save) printf("saved         %s\n", t.o.save);
            if (t.o.trace) printf("trace         %s\n", t.o.trace);
        }
    }
    free(peak);
    free(times);
    free(losses);
    state_free(&t);
    sf_comm_free(t.comm);
    return rc;
}
