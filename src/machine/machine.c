/*
 * machine.c - a cluster built from an sf_machine_desc: devices, directed links
 * and a route for every ordered pair of devices, both given by a rule.
 *
 * Layout. Devices are numbered node by node (device id = node * D + local, D =
 * devices_per_node). Links are numbered node by node too: first the node's
 * intra-node links, then its NIC links (out, in for NIC 0, then NIC 1, ...),
 * so every link id is arithmetic on (node, local index) and the route builder
 * needs no lookup tables:
 *
 *   PAIRWISE, SHM  D*(D-1) links, one per ordered pair (i, j), i != j
 *   SWITCH         2*D links: device i -> switch (up), switch -> device i (down)
 *   PCIE_TREE      2*D device <-> PCIe switch links (intra bandwidth), then
 *                  2*S switch <-> host root links (pcie_up bandwidth), S = D/G
 *   every node     2*K NIC links (K = nics_per_node), created even on a
 *                  one-node machine so that the count does not depend on nodes
 *
 * Routes (a -> b, device a at (na, i), b at (nb, j)):
 *
 *   same node      PAIRWISE/SHM: the pair's link. SWITCH: up(i), down(j).
 *                  PCIE_TREE, same switch: up(i), down(j); other switch:
 *                  up(i), sw_up(i/G), sw_down(j/G), down(j).
 *   other node     nic_out(na, i % K), nic_in(nb, j % K); for PCIE_TREE the
 *                  transfer first climbs to the host root and finally descends
 *                  from it: up(i), sw_up, nic_out, nic_in, sw_down, down(j).
 *
 * For PAIRWISE, SWITCH and SHM the inter-node route is only the two NIC links:
 * NVLink/NVSwitch machines (DGX, the P100 cluster) move data between GPU memory
 * and the NIC by GPUDirect RDMA over a PCIe path that is not the bottleneck, so
 * modelling it would add latency the hardware does not pay. On the K80 machine
 * the PCIe tree is the bottleneck and the NIC hangs off the host root, so the
 * PCIe hops stay on the route and contend with intra-node traffic, which is
 * the point of modelling that machine at all.
 *
 * Every link carries its own latency, so a route of L links pays L latencies
 * and L store-and-forward copies in sf_machine_transfer_time_s; the simulator
 * decides how the hops of one transfer overlap.
 *
 * Nothing is stored per link or per pair of devices: a link's record is
 * decoded from its id (link_fill), its name printed from it on demand
 * (sf_machine_link_name), and a route computed from the two devices
 * (compute_route), each in a few integer divisions. The machine used to hold
 * a link record per link and a route per ordered pair: 16 M routes at 4000
 * devices whatever the topology, and a pairwise node of D devices D(D-1)
 * records, which made a 4096-device pairwise node 2 GB and 7-20 s to build
 * (bench/RESULTS.md, "Large machines"). A table lookup is no faster than the
 * arithmetic once the table outgrows the caches, and a machine's topology is
 * regular by construction (one rule per node, every node alike), so the rule
 * is the representation. A simulator that needs state per link keeps it only
 * for the links its tasks use (sim.c).
 *
 * Memory: one allocation holds the machine and its devices, sized with
 * overflow checks before anything is written, so a machine is freed by one
 * call and never allocates after sf_machine_build.
 */
#include "soapflow/machine.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SF_MAX_NICS 1024

struct sf_machine {
    sf_machine_desc desc;
    int n_devices, n_nodes, n_links;
    int links_per_node; /* intra links + 2 * nics */
    int intra_per_node; /* intra links only */
    sf_device *devices; /* (n_devices) */
};

static const char *const dtype_names[] = {"fp32", "fp16", "bf16", "tf32"};
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == SF_DTYPE_COUNT, "one name per dtype");

static const char *const link_type_names[] = {
    "nvlink", "switch_up", "switch_down", "pcie_up", "pcie_down", "shm", "nic_out", "nic_in",
};
_Static_assert(sizeof link_type_names / sizeof link_type_names[0] == SF_LINK_TYPE_COUNT,
               "one name per link type");

static const char *const topology_names[] = {"pairwise", "switch", "pcie_tree", "shm"};
_Static_assert(sizeof topology_names / sizeof topology_names[0] == SF_INTRA_COUNT,
               "one name per topology");

const char *sf_dtype_name(sf_dtype t) {
    if ((int)t < 0 || t >= SF_DTYPE_COUNT) return "unknown";
    return dtype_names[t];
}

int sf_dtype_parse(const char *name, sf_dtype *out) {
    for (int t = 0; name && t < SF_DTYPE_COUNT; t++)
        if (strcmp(name, dtype_names[t]) == 0) {
            *out = (sf_dtype)t;
            return 0;
        }
    return -1;
}

int sf_dtype_bytes(sf_dtype t) {
    if ((int)t < 0 || t >= SF_DTYPE_COUNT) return 0;
    return t == SF_DTYPE_FP32 || t == SF_DTYPE_TF32 ? 4 : 2;
}

int sf_dtype_mixed(sf_dtype t) { return t == SF_DTYPE_FP16 || t == SF_DTYPE_BF16; }

static const char *const eff_class_names[] = {"conv2d", "gemm", "attention", "lstm", "lstm_step"};
_Static_assert(sizeof eff_class_names / sizeof eff_class_names[0] == SF_EFF_COUNT,
               "one name per efficiency class");

const char *sf_eff_class_name(sf_eff_class c) {
    if ((int)c < 0 || c >= SF_EFF_COUNT) return "unknown";
    return eff_class_names[c];
}

const char *sf_link_type_name(sf_link_type t) {
    if ((int)t < 0 || t >= SF_LINK_TYPE_COUNT) return "unknown";
    return link_type_names[t];
}

const char *sf_intra_topology_name(sf_intra_topology t) {
    if ((int)t < 0 || t >= SF_INTRA_COUNT) return "unknown";
    return topology_names[t];
}

/* ---- validation -------------------------------------------------------- */

static int is_mem(double x) { return isfinite(x) && x > 0 && x <= SF_MAX_MEM_BYTES; }
static int is_rate(double x) { return isfinite(x) && x >= SF_MIN_RATE && x <= SF_MAX_RATE; }
static int is_latency(double x) { return isfinite(x) && x >= 0 && x <= SF_MAX_LATENCY_S; }

static int name_ok(const char *s, size_t cap) {
    size_t n = strnlen(s, cap);
    return n > 0 && n < cap;
}

sf_status sf_machine_desc_validate(const sf_machine_desc *d, sf_error *err) {
    if (!d) return sf_error_set(err, SF_ERR_INVALID, "machine description is NULL");
    if (!name_ok(d->name, sizeof d->name))
        return sf_error_set(err, SF_ERR_INVALID, "machine name must be 1 to %d characters",
                            SF_NAME_MAX - 1);
    if (!name_ok(d->kind.name, sizeof d->kind.name))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device name must be 1 to %d "
                            "characters",
                            d->name, SF_NAME_MAX - 1);
    const char *mn = d->name;
    if (d->nodes < 1)
        return sf_error_set(err, SF_ERR_INVALID, "machine '%s': nodes must be >= 1 (got %d)", mn,
                            d->nodes);
    if (d->devices_per_node < 1)
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': devices_per_node must be >= 1 (got %d)", mn,
                            d->devices_per_node);
    if (d->devices_per_node > SF_MAX_DEVICES / d->nodes)
        return sf_error_set(err, SF_ERR_RANGE,
                            "machine '%s': %d nodes x %d devices exceeds the limit of %d devices",
                            mn, d->nodes, d->devices_per_node, SF_MAX_DEVICES);
    if (!is_rate(d->kind.peak_flops[SF_DTYPE_FP32]))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device fp32 peak must be from 1 to %g FLOP/s", mn,
                            SF_MAX_RATE);
    for (int t = 0; t < SF_DTYPE_COUNT; t++) {
        if (d->kind.peak_flops[t] != 0 && !is_rate(d->kind.peak_flops[t]))
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': device %s peak must be 0 (unsupported) or from 1 "
                                "to %g FLOP/s",
                                mn, dtype_names[t], SF_MAX_RATE);
    }
    if (!is_rate(d->kind.mem_bw_Bps))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device memory bandwidth must be from 1 to %g B/s", mn,
                            SF_MAX_RATE);
    for (int c = 0; c < SF_EFF_COUNT; c++)
        for (int t = 0; t < SF_DTYPE_COUNT; t++) {
            double e = d->kind.efficiency[c][t];
            if (!(isfinite(e) && e >= 0 && e <= 1))
                return sf_error_set(err, SF_ERR_INVALID,
                                    "machine '%s': device efficiency %s.%s must be 0 (the "
                                    "model's default) or in (0, 1], got %g",
                                    mn, eff_class_names[c], dtype_names[t], e);
            if (e > 0 && !(d->kind.peak_flops[t] > 0))
                return sf_error_set(err, SF_ERR_INVALID,
                                    "machine '%s': device efficiency %s.%s given, but the "
                                    "device has no %s peak",
                                    mn, eff_class_names[c], dtype_names[t], dtype_names[t]);
        }
    for (int t = 0; t < SF_DTYPE_COUNT; t++) {
        double r = d->kind.conv3x3_flop_ratio[t];
        if (!(isfinite(r) && r >= 0 && r <= 1))
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': device conv3x3_flop_ratio.%s must be 0 (none) or "
                                "in (0, 1], got %g",
                                mn, dtype_names[t], r);
    }
    if (!(isfinite(d->kind.mem_efficiency) && d->kind.mem_efficiency >= 0 &&
          d->kind.mem_efficiency <= 1))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device mem_efficiency must be 0 (the model's default) "
                            "or in (0, 1], got %g",
                            mn, d->kind.mem_efficiency);
    if (!is_latency(d->kind.launch_s))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device launch time must be from 0 to %g s", mn,
                            SF_MAX_LATENCY_S);
    if (!is_latency(d->kind.host_overhead_s))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device host_overhead must be from 0 to %g s", mn,
                            SF_MAX_LATENCY_S);
    if (!(d->kind.input_samples_per_s == 0 || is_rate(d->kind.input_samples_per_s)))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device input_samples_per_s must be 0 (not modelled) "
                            "or from %g to %g, got %g",
                            mn, SF_MIN_RATE, SF_MAX_RATE, d->kind.input_samples_per_s);
    if (d->kind.rnn_per_step != 0 && d->kind.rnn_per_step != 1)
        return sf_error_set(err, SF_ERR_INVALID, "machine '%s': device rnn_per_step must be 0 or 1",
                            mn);
    if (!is_mem(d->kind.mem_bytes))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': device memory size must be above 0 and at most %g "
                            "bytes",
                            mn, SF_MAX_MEM_BYTES);
    if ((int)d->intra < 0 || d->intra >= SF_INTRA_COUNT)
        return sf_error_set(err, SF_ERR_INVALID, "machine '%s': unknown intra-node topology %d", mn,
                            (int)d->intra);
    if (!is_rate(d->intra_bw_Bps))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': intra-node bandwidth must be from 1 to %g B/s", mn,
                            SF_MAX_RATE);
    if (!is_latency(d->intra_latency_s))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': intra-node latency must be from 0 to 1 s", mn);
    if (d->intra == SF_INTRA_PCIE_TREE) {
        if (d->pcie_group < 1 || d->devices_per_node % d->pcie_group != 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': pcie_group (%d) must be >= 1 and divide "
                                "devices_per_node (%d)",
                                mn, d->pcie_group, d->devices_per_node);
        if (!is_rate(d->pcie_up_bw_Bps))
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': PCIe switch-to-host bandwidth must be from 1 to "
                                "%g B/s",
                                mn, SF_MAX_RATE);
    }
    if (d->nics_per_node < 1 || d->nics_per_node > SF_MAX_NICS)
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': nics_per_node must be 1 to %d (got %d)", mn, SF_MAX_NICS,
                            d->nics_per_node);
    if (!is_rate(d->inter_bw_Bps))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': inter-node (NIC) bandwidth must be from 1 to %g B/s", mn,
                            SF_MAX_RATE);
    if (!is_latency(d->inter_latency_s))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': inter-node latency must be from 0 to 1 s", mn);
    if (d->cores_per_node < 0 || d->cores_per_node > SF_MAX_DEVICES)
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': cores_per_node must be 0 to %d (got %d)", mn,
                            SF_MAX_DEVICES, d->cores_per_node);
    if (d->copy_bw_Bps != 0 && !is_rate(d->copy_bw_Bps))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': copy bandwidth must be 0 or from 1 to %g B/s", mn,
                            SF_MAX_RATE);
    if (d->sync_after_backward != 0 && d->sync_after_backward != 1)
        return sf_error_set(err, SF_ERR_INVALID, "machine '%s': sync_after_backward must be 0 or 1",
                            mn);
    if (!is_latency(d->copy_run_s))
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': a copy run's time must be from 0 to 1 s", mn);
    if (d->n_sync < 0 || d->n_sync > SF_MAX_SYNC_POINTS)
        return sf_error_set(err, SF_ERR_INVALID,
                            "machine '%s': the all-reduce curve has 0 to %d points (got %d)", mn,
                            SF_MAX_SYNC_POINTS, d->n_sync);
    for (int i = 0; i < d->n_sync; i++) {
        double b = d->sync_bytes[i];
        if (!(b >= 1 && b <= SF_MAX_MEM_BYTES) || (i > 0 && !(b > d->sync_bytes[i - 1])))
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': all-reduce point %d: sizes must increase, from 1 "
                                "to %g bytes",
                                mn, i, SF_MAX_MEM_BYTES);
        if (!is_rate(d->sync_bw_Bps[i]))
            return sf_error_set(err, SF_ERR_INVALID,
                                "machine '%s': all-reduce point %d: bandwidth must be from 1 to "
                                "%g B/s",
                                mn, i, SF_MAX_RATE);
    }
    return SF_OK;
}

double sf_machine_sync_bw(const sf_machine_desc *d, double bytes) {
    int n = d->n_sync;
    if (n <= 0) return 0;
    if (bytes <= d->sync_bytes[0]) return d->sync_bw_Bps[0];
    if (bytes >= d->sync_bytes[n - 1]) return d->sync_bw_Bps[n - 1];
    int i = 1;
    while (d->sync_bytes[i] < bytes) i++;
    double f = log(bytes / d->sync_bytes[i - 1]) / log(d->sync_bytes[i] / d->sync_bytes[i - 1]);
    return d->sync_bw_Bps[i - 1] + f * (d->sync_bw_Bps[i] - d->sync_bw_Bps[i - 1]);
}

/* ---- link numbering ---------------------------------------------------- */

static int intra_links_per_node(const sf_machine_desc *d) {
    int n = d->devices_per_node;
    switch (d->intra) {
    case SF_INTRA_PAIRWISE:
    case SF_INTRA_SHM: return n * (n - 1);
    case SF_INTRA_SWITCH: return 2 * n;
    case SF_INTRA_PCIE_TREE: return 2 * n + 2 * (n / d->pcie_group);
    case SF_INTRA_COUNT: break;
    }
    return 0;
}

static int node_base(const sf_machine *m, int node) { return node * m->links_per_node; }

/* PAIRWISE/SHM: the link from local i to local j (i != j) of a node. */
static int pair_link(const sf_machine *m, int node, int i, int j) {
    assert(i != j);
    return node_base(m, node) + i * (m->desc.devices_per_node - 1) + (j < i ? j : j - 1);
}

/* SWITCH/PCIE_TREE: device <-> its switch. */
static int dev_up_link(const sf_machine *m, int node, int i) { return node_base(m, node) + 2 * i; }
static int dev_down_link(const sf_machine *m, int node, int i) {
    return node_base(m, node) + 2 * i + 1;
}

/* PCIE_TREE: PCIe switch s <-> host root. */
static int sw_up_link(const sf_machine *m, int node, int s) {
    return node_base(m, node) + 2 * m->desc.devices_per_node + 2 * s;
}
static int sw_down_link(const sf_machine *m, int node, int s) { return sw_up_link(m, node, s) + 1; }

static int nic_out_link(const sf_machine *m, int node, int nic) {
    return node_base(m, node) + m->intra_per_node + 2 * nic;
}
static int nic_in_link(const sf_machine *m, int node, int nic) {
    return nic_out_link(m, node, nic) + 1;
}

/* ---- links from their ids ------------------------------------------------ */

/* Everything about link `id` (0 <= id < n_links) but its name: the inverse of the
 * numbering above. Pairwise offset o = i * (D - 1) + (j < i ? j : j - 1). */
static void link_fill(const sf_machine *m, int id, sf_link *l) {
    const sf_machine_desc *d = &m->desc;
    int nd = d->devices_per_node;
    int node = id / m->links_per_node, o = id % m->links_per_node, g0 = node * nd;
    l->id = id;
    l->node = node;
    l->src_dev = l->dst_dev = -1;
    if (o >= m->intra_per_node) {
        l->type = (o - m->intra_per_node) % 2 == 0 ? SF_LINK_NIC_OUT : SF_LINK_NIC_IN;
    } else if (d->intra == SF_INTRA_PAIRWISE || d->intra == SF_INTRA_SHM) {
        int i = o / (nd - 1), r = o % (nd - 1);
        l->type = d->intra == SF_INTRA_SHM ? SF_LINK_SHM : SF_LINK_NVLINK;
        l->src_dev = g0 + i;
        l->dst_dev = g0 + (r < i ? r : r + 1);
    } else if (o < 2 * nd) {
        int up = o % 2 == 0;
        l->type = up ? SF_LINK_SWITCH_UP : SF_LINK_SWITCH_DOWN;
        *(up ? &l->src_dev : &l->dst_dev) = g0 + o / 2;
    } else {
        l->type = (o - 2 * nd) % 2 == 0 ? SF_LINK_PCIE_UP : SF_LINK_PCIE_DOWN;
    }
    l->inter_node = l->type == SF_LINK_NIC_OUT || l->type == SF_LINK_NIC_IN;
    if (l->inter_node) {
        l->bandwidth_Bps = d->inter_bw_Bps;
        l->latency_s = d->inter_latency_s;
    } else if (l->type == SF_LINK_PCIE_UP || l->type == SF_LINK_PCIE_DOWN) {
        l->bandwidth_Bps = d->pcie_up_bw_Bps;
        l->latency_s = d->intra_latency_s;
    } else {
        l->bandwidth_Bps = d->intra_bw_Bps;
        l->latency_s = d->intra_latency_s;
    }
}

/* ---- routes --------------------------------------------------------------- */

static void route_push(sf_route *r, int link) {
    assert(r->n_links < SF_MAX_ROUTE);
    r->links[r->n_links++] = link;
}

static void compute_route(const sf_machine *m, int a, int b, sf_route *r) {
    const sf_machine_desc *d = &m->desc;
    int nd = d->devices_per_node, k = d->nics_per_node;
    int na = a / nd, i = a % nd, nb = b / nd, j = b % nd;
    int pcie = d->intra == SF_INTRA_PCIE_TREE;
    int g = pcie ? d->pcie_group : 1;
    r->n_links = 0;
    if (a == b) return;
    if (na == nb) {
        switch (d->intra) {
        case SF_INTRA_PAIRWISE:
        case SF_INTRA_SHM: route_push(r, pair_link(m, na, i, j)); break;
        case SF_INTRA_SWITCH:
            route_push(r, dev_up_link(m, na, i));
            route_push(r, dev_down_link(m, na, j));
            break;
        case SF_INTRA_PCIE_TREE:
            route_push(r, dev_up_link(m, na, i));
            if (i / g != j / g) {
                route_push(r, sw_up_link(m, na, i / g));
                route_push(r, sw_down_link(m, na, j / g));
            }
            route_push(r, dev_down_link(m, na, j));
            break;
        case SF_INTRA_COUNT: break;
        }
        return;
    }
    if (pcie) {
        route_push(r, dev_up_link(m, na, i));
        route_push(r, sw_up_link(m, na, i / g));
    }
    route_push(r, nic_out_link(m, na, i % k));
    route_push(r, nic_in_link(m, nb, j % k));
    if (pcie) {
        route_push(r, sw_down_link(m, nb, j / g));
        route_push(r, dev_down_link(m, nb, j));
    }
}

/* ---- building ---------------------------------------------------------- */

static size_t round16(size_t x) { return (x + 15) & ~(size_t)15; }

sf_machine *sf_machine_build(const sf_machine_desc *desc, sf_error *err) {
    if (sf_machine_desc_validate(desc, err) != SF_OK) return NULL;
    /* Validation bounds devices by SF_MAX_DEVICES and NICs by SF_MAX_NICS, so
     * these int products fit; the byte sizes are still checked below. */
    int n_dev = desc->nodes * desc->devices_per_node;
    int64_t intra = intra_links_per_node(desc);
    int64_t per_node = intra + 2 * (int64_t)desc->nics_per_node;
    int64_t n_links64;
    if (sf_mul_overflow_i64(per_node, desc->nodes, &n_links64) != 0 || n_links64 > INT_MAX) {
        sf_error_set(err, SF_ERR_RANGE, "machine '%s': too many links", desc->name);
        return NULL;
    }
    size_t devs_bytes;
    if (sf_mul_overflow_size((size_t)n_dev, sizeof(sf_device), &devs_bytes) != 0) {
        sf_error_set(err, SF_ERR_RANGE, "machine '%s': too large", desc->name);
        return NULL;
    }
    size_t off_devs = round16(sizeof(sf_machine));
    size_t total = off_devs + devs_bytes;
    unsigned char *block = calloc(1, total);
    if (!block) {
        sf_error_set(err, SF_ERR_NOMEM, "machine '%s': out of memory (%zu bytes)", desc->name,
                     total);
        return NULL;
    }
    sf_machine *m = (sf_machine *)block;
    m->desc = *desc;
    m->n_devices = n_dev;
    m->n_nodes = desc->nodes;
    m->n_links = (int)n_links64;
    m->intra_per_node = (int)intra;
    m->links_per_node = (int)per_node;
    m->devices = (sf_device *)(void *)(block + off_devs);
    for (int id = 0; id < n_dev; id++) {
        m->devices[id].id = id;
        m->devices[id].node = id / desc->devices_per_node;
        m->devices[id].local = id % desc->devices_per_node;
        m->devices[id].kind = 0;
    }
    return m;
}

void sf_machine_free(sf_machine *m) { free(m); }

/* ---- subsets ----------------------------------------------------------- */

sf_machine *sf_machine_subset(const sf_machine *m, int n, sf_error *err) {
    if (!m) {
        sf_error_set(err, SF_ERR_INVALID, "machine is NULL");
        return NULL;
    }
    const sf_machine_desc *d = &m->desc;
    if (n < 1 || n > m->n_devices) {
        sf_error_set(err, SF_ERR_RANGE, "machine '%s': a subset needs 1 to %d devices (got %d)",
                     d->name, m->n_devices, n);
        return NULL;
    }
    sf_machine_desc s = *d;
    if (n < d->devices_per_node) {
        s.nodes = 1;
        s.devices_per_node = n;
        if (d->intra == SF_INTRA_PCIE_TREE && n % d->pcie_group != 0) {
            /* The first n devices fill switches in order; a lone partial
             * switch is still a switch, a partial one after full ones is not
             * expressible with one group size. */
            if (n < d->pcie_group) {
                s.pcie_group = n;
            } else {
                sf_error_set(err, SF_ERR_INVALID,
                             "machine '%s': the first %d devices would leave a PCIe switch half "
                             "used: within a node, N must be below or a multiple of its "
                             "pcie_group %d",
                             d->name, n, d->pcie_group);
                return NULL;
            }
        }
    } else {
        if (n % d->devices_per_node != 0) {
            sf_error_set(err, SF_ERR_INVALID,
                         "machine '%s': the first %d devices are neither within one node nor "
                         "whole nodes: N must be at most %d or a multiple of %d",
                         d->name, n, d->devices_per_node, d->devices_per_node);
            return NULL;
        }
        s.nodes = n / d->devices_per_node;
    }
    /* "p100-4x4[8]": the parent's name, cut so that the suffix always fits. */
    snprintf(s.name, sizeof s.name, "%.48s[%d]", d->name, n);
    return sf_machine_build(&s, err);
}

/* ---- accessors --------------------------------------------------------- */

const char *sf_machine_name(const sf_machine *m) { return m->desc.name; }
const sf_machine_desc *sf_machine_get_desc(const sf_machine *m) { return &m->desc; }
int sf_machine_num_devices(const sf_machine *m) { return m->n_devices; }
int sf_machine_num_nodes(const sf_machine *m) { return m->n_nodes; }
int sf_machine_num_links(const sf_machine *m) { return m->n_links; }

const sf_device *sf_machine_device(const sf_machine *m, int id) {
    if (id < 0 || id >= m->n_devices) return NULL;
    return &m->devices[id];
}

const sf_device_kind *sf_machine_device_kind(const sf_machine *m, int device) {
    if (device < 0 || device >= m->n_devices) return NULL;
    return &m->desc.kind;
}

const sf_link *sf_machine_link(const sf_machine *m, int id, sf_link *out) {
    if (id < 0 || id >= m->n_links) return NULL;
    link_fill(m, id, out);
    return out;
}

const char *sf_machine_link_name(const sf_machine *m, int id, char *buf, size_t cap) {
    if (cap == 0) return NULL;
    buf[0] = '\0';
    if (id < 0 || id >= m->n_links) return NULL;
    sf_link l;
    link_fill(m, id, &l);
    int n = l.node, nd = m->desc.devices_per_node;
    int i = l.src_dev - n * nd, j = l.dst_dev - n * nd; /* local indices, when devices */
    int o = id % m->links_per_node;
    int g = m->desc.intra == SF_INTRA_PCIE_TREE ? m->desc.pcie_group : nd;
    int s = (o - 2 * nd) / 2; /* PCIe links: the switch */
    switch (l.type) {
    case SF_LINK_NVLINK:
    case SF_LINK_SHM: snprintf(buf, cap, "n%d.d%d->n%d.d%d", n, i, n, j); break;
    case SF_LINK_SWITCH_UP: snprintf(buf, cap, "n%d.d%d->n%d.sw%d", n, i, n, i / g); break;
    case SF_LINK_SWITCH_DOWN: snprintf(buf, cap, "n%d.sw%d->n%d.d%d", n, j / g, n, j); break;
    case SF_LINK_PCIE_UP: snprintf(buf, cap, "n%d.sw%d->n%d.root", n, s, n); break;
    case SF_LINK_PCIE_DOWN: snprintf(buf, cap, "n%d.root->n%d.sw%d", n, n, s); break;
    case SF_LINK_NIC_OUT:
    case SF_LINK_NIC_IN:
        snprintf(buf, cap, "n%d.nic%d.%s", n, (o - m->intra_per_node) / 2,
                 l.type == SF_LINK_NIC_OUT ? "out" : "in");
        break;
    case SF_LINK_TYPE_COUNT: break;
    }
    return buf; /* snprintf cut a name longer than cap */
}

void sf_machine_route(const sf_machine *m, int a, int b, sf_route *out) {
    if (a < 0 || b < 0 || a >= m->n_devices || b >= m->n_devices) {
        out->n_links = 0; /* no such device: no route, and no time */
        return;
    }
    compute_route(m, a, b, out);
}

int sf_machine_compute_unit(const sf_machine *m, int dev) {
    const sf_machine_desc *d = sf_machine_get_desc(m);
    int per = d->devices_per_node, cores = d->cores_per_node;
    if (cores <= 0 || cores >= per) return dev;
    return dev - dev % per + dev % per % cores;
}

double sf_machine_transfer_time_s(const sf_machine *m, int a, int b, double bytes) {
    sf_route r;
    sf_machine_route(m, a, b, &r);
    double t = 0;
    for (int i = 0; i < r.n_links; i++) {
        sf_link l;
        link_fill(m, r.links[i], &l);
        t += l.latency_s + bytes / l.bandwidth_Bps;
    }
    return t;
}

/* Every device of a machine is of its description's kind, so one look at the
 * kind answers for all of them. */
sf_status sf_machine_check_dtype(const sf_machine *m, sf_dtype t, sf_error *err) {
    if (!m) return sf_error_set(err, SF_ERR_INVALID, "machine is NULL");
    if ((int)t < 0 || t >= SF_DTYPE_COUNT)
        return sf_error_set(err, SF_ERR_INVALID, "machine '%s': invalid dtype %d",
                            sf_machine_name(m), (int)t);
    const sf_device_kind *k = &sf_machine_get_desc(m)->kind;
    if (k->peak_flops[t] > 0) return SF_OK;
    char has[32] = "";
    size_t n = 0;
    for (int u = 0; u < SF_DTYPE_COUNT; u++)
        if (k->peak_flops[u] > 0 && n < sizeof has) {
            int w = snprintf(has + n, sizeof has - n, "%s%s", n ? ", " : "", dtype_names[u]);
            if (w > 0) n += (size_t)w;
        }
    return sf_error_set(err, SF_ERR_UNSUPPORTED,
                        "machine '%s': device %s has no %s peak (it has %s), so it cannot plan "
                        "in %s",
                        sf_machine_name(m), k->name, dtype_names[t], has, dtype_names[t]);
}
