/*
 * soapflow/machine.h - devices, links and routes of a cluster.
 *
 * Quick tour:
 *
 *     sf_error err = {0};
 *     sf_machine *m = sf_machine_preset("p100-4x4", &err);   // or sf_machine_load_json
 *     const sf_device *d = sf_machine_device(m, 5);           // node 1, local index 1
 *     sf_route r;
 *     sf_machine_route(m, 0, 5, &r);                           // links a transfer crosses
 *     double t = 0;                                            // 1 MB alone, link by link
 *     for (int i = 0; i < r.n_links; i++) {
 *         sf_link lb;
 *         const sf_link *l = sf_machine_link(m, r.links[i], &lb);
 *         t += l->latency_s + 1e6 / l->bandwidth_Bps;
 *     }                                           // == sf_machine_transfer_time_s(m, 0, 5, 1e6)
 *     sf_machine_free(m);
 *
 * A machine is devices grouped into nodes, and directed links, each a resource
 * with a bandwidth and a latency. Inside a node the devices are joined by one
 * topology (direct pairwise links as NVLink meshes, a non-blocking switch as
 * NVSwitch, or PCIe switches shared by groups of devices under a host root);
 * nodes are joined by NICs (one or more per node) into a non-blocking fabric.
 * Every ordered pair of devices has a fixed route (a list of links); a
 * transfer of B bytes over a route takes, on each link, latency + B / bandwidth
 * (the simulator decides how they overlap).
 *
 * Links and routes follow from the description by a rule, so none is stored:
 * sf_machine_link and sf_machine_route compute what they return (a few integer
 * divisions), and a machine takes memory for its devices only, even a pairwise
 * node of 4096 devices and its 16.8 M links. Link ids are dense (0 to
 * sf_machine_num_links - 1); a program that keeps state per link should keep it
 * for the links it meets, not for every id (the simulator does).
 */
#ifndef SOAPFLOW_MACHINE_H
#define SOAPFLOW_MACHINE_H

#include "soapflow/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_MAX_ROUTE 8 /* most links on one route */
#define SF_NAME_MAX 64

/* SF_DTYPE_TF32: fp32 storage, products on TensorFloat-32 tensor cores (A100
 * onwards; PyTorch's allow_tf32): 4-byte elements, no compute copy. */
typedef enum sf_dtype {
    SF_DTYPE_FP32 = 0,
    SF_DTYPE_FP16,
    SF_DTYPE_BF16,
    SF_DTYPE_TF32,
    SF_DTYPE_COUNT
} sf_dtype;

SF_API const char *sf_dtype_name(sf_dtype t); /* "fp32", "fp16", "bf16", "tf32" */
/* Parse a dtype name ("fp32", "fp16", "bf16", "tf32"); -1 when unknown. */
SF_API int sf_dtype_parse(const char *name, sf_dtype *out);
/* Bytes of one element: 4 for fp32 and tf32, 2 for fp16 and bf16; 0 for an invalid dtype. */
SF_API int sf_dtype_bytes(sf_dtype t);
/* 1 for a mixed-precision dtype (16-bit compute copy beside fp32 master
 * weights: fp16, bf16), 0 for fp32 and tf32 (fp32 storage) and invalid ones. */
SF_API int sf_dtype_mixed(sf_dtype t);

/* The classes of operators a device gives its own compute efficiencies for
 * (sf_device_kind.efficiency; docs/cost-model.md, "Efficiencies by device"). */
typedef enum sf_eff_class {
    SF_EFF_CONV = 0,  /* conv2d */
    SF_EFF_GEMM,      /* linear, matmul */
    SF_EFF_ATTENTION, /* attention (its projections and the per-head products) */
    SF_EFF_LSTM,      /* lstm: the batched input and weight-gradient products */
    SF_EFF_LSTM_STEP, /* lstm: one time step's recurrent product (priced per step) */
    SF_EFF_COUNT
} sf_eff_class;

SF_API const char *sf_eff_class_name(sf_eff_class c); /* "conv2d", "gemm", ... */

/* A kind of device, with the figures of its data sheet. */
typedef struct sf_device_kind {
    char name[SF_NAME_MAX];            /* "P100-SXM2" */
    double peak_flops[SF_DTYPE_COUNT]; /* FLOP/s; 0 when the dtype is unsupported */
    double mem_bw_Bps;                 /* device memory bandwidth, bytes/s */
    double mem_bytes;                  /* device memory size, bytes */
    /* The analytic cost model's figures for this device (docs/cost-model.md,
     * "Efficiencies by device"); 0 everywhere leaves the model's own defaults,
     * which is what the P100, K80 and CPU presets do. */
    double efficiency[SF_EFF_COUNT][SF_DTYPE_COUNT]; /* fraction of peak_flops[dtype] the class
                                                      * reaches; 0: the model's per-operator
                                                      * default */
    double conv3x3_flop_ratio[SF_DTYPE_COUNT];       /* FLOPs the library's algorithm does for a 3x3
                                                      * stride-1 convolution, per direct-count FLOP
                                                      * (Winograd: below 1); 0: 1 */
    double mem_efficiency; /* fraction of mem_bw_Bps reached; 0: default */
    double launch_s;       /* per-kernel overhead; 0: the model's default */
    int rnn_per_step;      /* 1: an lstm tile is priced step by step (each step's recurrent
                            * product and gates as kernels of their own); 0: as one product */
    /* What limits an iteration besides compute and communication (docs/cost-model.md,
     * "What limits scaling"); 0 leaves each out, as every preset without a figure does. */
    double host_overhead_s;     /* host time per iteration the device waits for (launches,
                                 * optimizer bookkeeping): added to the iteration once */
    double input_samples_per_s; /* the device's input pipeline (load, decode, normalize):
                                 * it prepares the next batch while the current one runs,
                                 * so an iteration takes at least its samples / this */
} sf_device_kind;

typedef struct sf_device {
    int id;    /* global index 0..n-1 */
    int node;  /* node index */
    int local; /* index within its node */
    int kind;  /* index into the machine's kinds */
} sf_device;

typedef enum sf_link_type {
    SF_LINK_NVLINK = 0,  /* direct device-device link */
    SF_LINK_SWITCH_UP,   /* device -> intra-node switch (NVSwitch, PCIe switch) */
    SF_LINK_SWITCH_DOWN, /* intra-node switch -> device */
    SF_LINK_PCIE_UP,     /* PCIe switch -> host root */
    SF_LINK_PCIE_DOWN,   /* host root -> PCIe switch */
    SF_LINK_SHM,         /* shared memory between ranks on one host */
    SF_LINK_NIC_OUT,     /* node -> network */
    SF_LINK_NIC_IN,      /* network -> node */
    SF_LINK_TYPE_COUNT
} sf_link_type;

SF_API const char *sf_link_type_name(sf_link_type t);

/* A directed link: a resource that carries one transfer at a time. A plain
 * value, filled by sf_machine_link; its name comes from sf_machine_link_name. */
typedef struct sf_link {
    int id;
    sf_link_type type;
    int inter_node;       /* 1 for NIC links */
    int node;             /* node it belongs to */
    int src_dev, dst_dev; /* devices at its ends, -1 for a switch or the network */
    double bandwidth_Bps; /* bytes per second */
    double latency_s;     /* seconds per message */
} sf_link;

#define SF_LINK_NAME_MAX 48 /* bytes a link name needs at most, the '\0' included */

typedef struct sf_route {
    int n_links;
    int links[SF_MAX_ROUTE];
} sf_route;

typedef enum sf_intra_topology {
    SF_INTRA_PAIRWISE = 0, /* a direct link for every ordered pair of devices */
    SF_INTRA_SWITCH,       /* each device has an up and a down link to a switch */
    SF_INTRA_PCIE_TREE,    /* groups of devices share a PCIe switch; switches meet at the host */
    SF_INTRA_SHM,          /* ranks on one host: one shared-memory link per ordered pair */
    SF_INTRA_COUNT
} sf_intra_topology;

/* The description a machine is built from: what the JSON format holds. */
#define SF_MAX_SYNC_POINTS 8 /* points of sf_machine_desc's all-reduce curve */

typedef struct sf_machine_desc {
    char name[SF_NAME_MAX];
    int nodes;
    int devices_per_node;
    sf_device_kind kind; /* every device is of this kind */
    sf_intra_topology intra;
    double intra_bw_Bps, intra_latency_s; /* per link */
    int pcie_group;                       /* PCIE_TREE: devices per switch */
    double pcie_up_bw_Bps;                /* PCIE_TREE: switch <-> host link bandwidth */
    int nics_per_node;                    /* device d uses NIC (local % nics) */
    double inter_bw_Bps, inter_latency_s; /* per NIC, each way */
    /* What a host runtime adds, as `soapflow calibrate` measures it for MPI
     * ranks on CPU cores; 0 leaves each out (the presets: GPUs, where kernels
     * and NCCL do this work, as FlexFlow's simulator assumes). */
    int cores_per_node;      /* cores the node's devices share: local device l computes on
                              * core l % cores, so devices on one core take turns; 0 or
                              * >= devices_per_node: a core each */
    double copy_bw_Bps;      /* the runtime's copies of tile regions (bytes read and written
                              * per second): local pairs not in place, packing and unpacking
                              * of messages and of all-reduced shards; 0: not priced */
    double copy_run_s;       /* and per contiguous run of such a copy (one memcpy call and the
                              * index arithmetic around it: sf_tile_runs), on top of its bytes;
                              * priced only with copy_bw_Bps; 0: runs cost nothing */
    int sync_after_backward; /* 1: the runtime runs the collectives of the weight sync after
                              * its backward pass whatever the sync mode (MPI's nonblocking
                              * collectives progress only inside MPI calls, so the runtime runs
                              * them blocking at the end: runtime.md), and the simulator's
                              * overlap mode starts them there as bulk mode does; 0: as the
                              * sync mode says */
    int n_sync;              /* points of the all-reduce curve below; 0: the link's bandwidth */
    double sync_bytes[SF_MAX_SYNC_POINTS]; /* all-reduced buffer sizes, increasing */
    double
        sync_bw_Bps[SF_MAX_SYNC_POINTS]; /* at each size: per-link bandwidth of a ring
                                          * all-reduce's steps (sf_machine_sync_bw), in place of
                                          * the link's (MPI_Allreduce on shared memory reduces on
                                          * the ranks' cores, far below the ping-pong rate, and at a
                                          * rate that falls as the buffer outgrows the caches) */
} sf_machine_desc;

SF_API const char *sf_intra_topology_name(sf_intra_topology t); /* "pairwise", "switch", ... */

typedef struct sf_machine sf_machine;

/* Check a description without building it (sf_machine_build does the same):
 * counts >= 1, peak rates and bandwidths from SF_MIN_RATE to SF_MAX_RATE
 * (fp16/bf16 peaks may be 0), memory sizes above 0 and at most
 * SF_MAX_MEM_BYTES, latencies from 0 to SF_MAX_LATENCY_S, pcie_group divides
 * devices_per_node, at most SF_MAX_DEVICES devices, cores_per_node from 0 to
 * SF_MAX_DEVICES, a copy bandwidth 0 or a rate, a copy run's time from 0 to
 * SF_MAX_LATENCY_S, sync_after_backward 0 or 1, 0 to SF_MAX_SYNC_POINTS
 * all-reduce points of increasing sizes from 1 to SF_MAX_MEM_BYTES bytes and
 * rates. SF_ERR_INVALID or
 * SF_ERR_RANGE with a message naming the field. The bounds lie far outside
 * any real hardware (an H100 is 1e15 FLOP/s, 3.35e12 B/s, 8e10 bytes); they
 * keep every figure and every simulated time finite: a positive but subnormal
 * bandwidth made transfer times infinite, and 1e300 TFLOPS or GB overflowed
 * to infinity once in FLOP/s or bytes. */
#define SF_MAX_DEVICES 4096
#define SF_MIN_RATE 1.0       /* FLOP/s, B/s */
#define SF_MAX_RATE 1e30      /* FLOP/s, B/s (1e18 TFLOPS, 1e21 GB/s) */
#define SF_MAX_MEM_BYTES 1e30 /* bytes per device (1e21 GB) */
#define SF_MAX_LATENCY_S 1.0  /* seconds per link */
SF_API sf_status sf_machine_desc_validate(const sf_machine_desc *desc, sf_error *err);
SF_API sf_machine *sf_machine_build(const sf_machine_desc *desc, sf_error *err);
/* The per-link bandwidth of the ring steps of an all-reduce of `bytes` from
 * the description's curve: linear in log(bytes) between its points, the end
 * points' beyond them; 0 (price with the links) when it has none. */
SF_API double sf_machine_sync_bw(const sf_machine_desc *d, double bytes);
SF_API void sf_machine_free(sf_machine *m);

/* Built-in presets: "p100-4x4", "k80-16x4", "dgx-1v", "dgx-a100", "dgx-h100", "cpu". */
SF_API int sf_machine_preset_count(void);
SF_API const char *sf_machine_preset_name(int i);
SF_API const char *sf_machine_preset_summary(int i); /* one line for `soapflow machines` */
SF_API sf_status sf_machine_preset_desc(const char *name, sf_machine_desc *out, sf_error *err);
SF_API sf_machine *sf_machine_preset(const char *name, sf_error *err);
/* A machine made of the first n devices of m, keeping their topology: "4-
 * and 8-device parts" of a cluster. The first n devices must make a machine
 * of one description: n is at most one node's devices (on a pcie_tree node,
 * below its pcie_group or a multiple of it, so that no switch is left half
 * used after a full one), or a whole number of nodes, and at most m's device
 * count. p100-4x4 takes 1 to 4, 8, 12 or 16. */
SF_API sf_machine *sf_machine_subset(const sf_machine *m, int n, sf_error *err);

SF_API const char *sf_machine_name(const sf_machine *m);
SF_API const sf_machine_desc *sf_machine_get_desc(const sf_machine *m);
SF_API int sf_machine_num_devices(const sf_machine *m);
SF_API int sf_machine_num_nodes(const sf_machine *m);
SF_API int sf_machine_num_links(const sf_machine *m);
SF_API const sf_device *sf_machine_device(const sf_machine *m, int id);
SF_API const sf_device_kind *sf_machine_device_kind(const sf_machine *m, int device);
/* Link `id` into *out, and out; NULL (and *out untouched) when there is no such
 * link. Computed from the id (a few integer divisions, nothing stored), so
 * thread-safe. */
SF_API const sf_link *sf_machine_link(const sf_machine *m, int id, sf_link *out);
/* The link's name into buf (cap bytes, SF_LINK_NAME_MAX always enough): "n0.d1->n0.d2"
 * (pairwise, shm), "n0.d1->n0.sw0" and back (switch and PCIe switch links),
 * "n0.sw1->n0.root" and back (PCIe switch and host root), "n2.nic0.out",
 * "n2.nic0.in". Returns buf; NULL (buf "") when there is no such link. */
SF_API const char *sf_machine_link_name(const sf_machine *m, int id, char *buf, size_t cap);
/* Route from device a to device b; an empty route when a == b (or either is
 * no device). Computed from a and b: no table. */
SF_API void sf_machine_route(const sf_machine *m, int a, int b, sf_route *out);
/* The resource device `dev` computes on: itself, or on a machine whose devices
 * share cores (cores_per_node below devices_per_node) the node's device whose
 * local number is that of the core (local device l computes on core l % cores),
 * so that the devices of one core take turns. */
SF_API int sf_machine_compute_unit(const sf_machine *m, int dev);
/* SF_OK when every device of m has a peak for dtype t (peak_flops[t] > 0); else
 * SF_ERR_UNSUPPORTED with one line naming the machine, the device and the dtype
 * ("machine 'p100-4x4': device P100-SXM2 has no bf16 peak (it has fp32, fp16)"). */
SF_API sf_status sf_machine_check_dtype(const sf_machine *m, sf_dtype t, sf_error *err);
/* Time for `bytes` to cross the route alone, store-and-forward: sum over links. */
SF_API double sf_machine_transfer_time_s(const sf_machine *m, int a, int b, double bytes);

#ifdef __cplusplus
}
#endif
#endif
