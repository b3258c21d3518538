/*
 * presets.c - built-in machine descriptions, with the sources of their figures.
 *
 * The presets let a user plan for a cluster they do not own: the two clusters
 * of the FlexFlow and OptCNN papers, and current DGX nodes. Figures are data
 * sheet peaks, so the analytic cost model applies its own efficiencies.
 *
 * Conventions. GB in a data sheet is taken as 1e9 bytes, also for memory sizes
 * that are really GiB: the smaller figure leaves headroom for the framework.
 * Every link on a route carries its own latency (see machine.c), so a figure
 * for a whole transfer is split over the links it crosses: an inter-node
 * message crosses two NIC links (2 x 2.5 us = 5 us end to end, the upper end of
 * the 2-5 us that MPI over InfiniBand measures, software included), a switch
 * transfer two switch links (2 x 1 us), a direct NVLink transfer one (2 us).
 *
 * Sources:
 *   peaks      peak_flops is {fp32, fp16, bf16}: the dense (no sparsity) rate of
 *              the data sheet, on tensor cores where the device has them; 0 where
 *              the device has no arithmetic in that dtype (bf16 before Ampere).
 *   P100 SXM2  NVIDIA Tesla P100 data sheet (2016): 10.6 TFLOP/s fp32, 21.2 fp16
 *              (no tensor cores, no bf16),
 *              732 GB/s HBM2, 16 GB. NVLink 1.0 moves 20 GB/s per link each way;
 *              the 4-GPU nodes of both papers give each pair a link.
 *   EDR IB     Mellanox ConnectX-4 EDR: 100 Gb/s = 12.5 GB/s per port.
 *   K80        NVIDIA Tesla K80 data sheet: per board (two GK210) 8.73 TFLOP/s
 *              fp32 with GPU Boost, 480 GB/s, 24 GB; halved per GK210. Kepler
 *              (compute capability 3.7) has no fp16 arithmetic (CUDA's half
 *              arithmetic needs 5.3) and no bf16 (8.0), so both peaks are 0 and
 *              a plan in either is refused. The board's
 *              PCIe switch joins its two GPUs, the boards meet at the host root
 *              complex; PCIe 3.0 x16 is 15.75 GB/s raw, ~12 GB/s in practice.
 *   FDR IB     Mellanox ConnectX-3 FDR: 56 Gb/s = 7 GB/s per port.
 *   A100 SXM   NVIDIA A100 data sheet (80GB SXM): 19.5 TFLOP/s fp32, 312 bf16/fp16
 *              tensor (dense), 2.0 TB/s (2,039 GB/s), 80 GB; third-generation
 *              NVLink through NVSwitch, 600 GB/s per GPU = 300 GB/s each way.
 *   DGX A100   user guide: 8 ConnectX-6 HDR 200 Gb/s (25 GB/s) compute NICs.
 *   H100 SXM   NVIDIA H100 data sheet: 67 TFLOP/s fp32, 989 bf16/fp16 tensor
 *              (dense; 1,979 with sparsity), 3.35 TB/s, 80 GB; fourth-generation
 *              NVLink, 900 GB/s per GPU = 450 GB/s each way.
 *   DGX H100   user guide: 8 ConnectX-7 NDR 400 Gb/s (50 GB/s) compute NICs.
 *   cpu        MPI ranks on this host. The figures are placeholders of the right
 *              order for one core of a current x86 CPU, overwritten by
 *              `soapflow calibrate`, which measures them. The NIC figures are
 *              never used by a one-node machine; validation needs them positive.
 */
#include "soapflow/machine.h"

#include <stdio.h>
#include <string.h>

/* Efficiencies of the tensor-core GPUs by class and dtype, {fp32, fp16, bf16,
 * tf32} (docs/cost-model.md, "Efficiencies by device", has the source of each
 * figure); 0 where the device lacks the dtype. */
/* clang-format off */
#define V100_EFF                                                                    \
    {[SF_EFF_CONV] = {V100_CONV_FP32, V100_CONV_FP16, 0, 0},                         \
     [SF_EFF_GEMM] = {V100_GEMM_FP32, V100_GEMM_FP16, 0, 0},                         \
     [SF_EFF_ATTENTION] = {V100_GEMM_FP32, V100_GEMM_FP16, 0, 0},                    \
     [SF_EFF_LSTM] = {V100_GEMM_FP32, V100_GEMM_FP16, 0, 0},                         \
     [SF_EFF_LSTM_STEP] = {V100_STEP_FP32, V100_STEP_FP16, 0, 0}}
#define A100_EFF                                                                    \
    {[SF_EFF_CONV] = {A100_CONV_FP32, A100_CONV_TC, A100_CONV_TC, A100_CONV_TF32},   \
     [SF_EFF_GEMM] = {A100_GEMM_FP32, A100_GEMM_TC, A100_GEMM_TC, A100_GEMM_TF32},   \
     [SF_EFF_ATTENTION] = {A100_GEMM_FP32, A100_GEMM_TC, A100_GEMM_TC, A100_GEMM_TF32}, \
     [SF_EFF_LSTM] = {A100_GEMM_FP32, A100_GEMM_TC, A100_GEMM_TC, A100_GEMM_TF32},   \
     [SF_EFF_LSTM_STEP] = {A100_STEP_FP32, A100_STEP_TC, A100_STEP_TC, A100_STEP_TF32}}
/* clang-format on */
/* H100: no figures of its own yet (no published per-class measurements at
 * hand and no published training throughput in bench/gpu_reference.py to hold
 * them against): the model's defaults, the LSTM as one product. */

#define V100_CONV_FP32 0.75
#define V100_CONV_FP16 0.6
#define V100_GEMM_FP32 0.85
#define V100_GEMM_FP16 0.55
/* lstm_step: fitted to GNMT's published rows, 1 and 8 GPUs together
 * (docs/cost-model.md, "Efficiencies by device") */
#define V100_STEP_FP32 0.4
#define V100_STEP_FP16 0.11
#define V100_CONV3X3                                                                               \
    { 1 / 2.25, 0, 0, 0 }
#define A100_CONV_FP32 0.75
#define A100_CONV_TF32 0.35
#define A100_CONV_TC 0.5
#define A100_GEMM_FP32 0.85
#define A100_GEMM_TF32 0.6
#define A100_GEMM_TC 0.55
#define A100_STEP_FP32 0.5
#define A100_STEP_TF32 0.08
#define A100_STEP_TC 0.07
#define A100_CONV3X3                                                                               \
    { 1 / 2.25, 0, 0, 0 }

typedef struct preset {
    const char *summary;
    sf_machine_desc desc;
} preset;

static const preset presets[] = {
    {"4 nodes x 4 P100-SXM2, NVLink pairs 20 GB/s, EDR InfiniBand 12.5 GB/s "
     "(FlexFlow and OptCNN cluster)",
     {.name = "p100-4x4",
      .nodes = 4,
      .devices_per_node = 4,
      .kind = {.name = "P100-SXM2",
               .peak_flops = {10.6e12, 21.2e12, 0},
               .mem_bw_Bps = 732e9,
               .mem_bytes = 16e9},
      .intra = SF_INTRA_PAIRWISE,
      .intra_bw_Bps = 20e9,
      .intra_latency_s = 2e-6,
      .nics_per_node = 1,
      .inter_bw_Bps = 12.5e9,
      .inter_latency_s = 2.5e-6}},
    {"16 nodes x 4 K80 (GK210), PCIe 3.0 switch per pair 12 GB/s, FDR InfiniBand 7 GB/s "
     "(FlexFlow's second cluster)",
     {.name = "k80-16x4",
      .nodes = 16,
      .devices_per_node = 4,
      .kind = {.name = "K80-GK210",
               .peak_flops = {4.37e12, 0, 0},
               .mem_bw_Bps = 240e9,
               .mem_bytes = 12e9},
      .intra = SF_INTRA_PCIE_TREE,
      .intra_bw_Bps = 12e9,
      .intra_latency_s = 1e-6,
      .pcie_group = 2,
      .pcie_up_bw_Bps = 12e9,
      .nics_per_node = 1,
      .inter_bw_Bps = 7e9,
      .inter_latency_s = 2.5e-6}},
    {"4 DGX-1 nodes x 8 V100-SXM2-16GB, NVLink 2.0 25 GB/s per pair, 4 x EDR InfiniBand "
     "12.5 GB/s",
     {.name = "dgx-1v",
      .nodes = 4,
      .devices_per_node = 8,
      .kind = {.name = "V100-SXM2-16GB",
               .peak_flops = {15.7e12, 125e12, 0, 0},
               .mem_bw_Bps = 900e9,
               .mem_bytes = 16e9,
               .efficiency = V100_EFF,
               .conv3x3_flop_ratio = V100_CONV3X3,
               .rnn_per_step = 1},
      .intra = SF_INTRA_PAIRWISE,
      .intra_bw_Bps = 25e9,
      .intra_latency_s = 2e-6,
      .nics_per_node = 4,
      .inter_bw_Bps = 12.5e9,
      .inter_latency_s = 2.5e-6}},
    {"8 DGX A100 nodes x 8 A100-SXM4-80GB, NVSwitch 300 GB/s, 8 x HDR InfiniBand 25 GB/s",
     {.name = "dgx-a100",
      .nodes = 8,
      .devices_per_node = 8,
      .kind = {.name = "A100-SXM4-80GB",
               .peak_flops = {19.5e12, 312e12, 312e12, 156e12},
               .mem_bw_Bps = 2000e9,
               .mem_bytes = 80e9,
               .efficiency = A100_EFF,
               .conv3x3_flop_ratio = A100_CONV3X3,
               .rnn_per_step = 1},
      .intra = SF_INTRA_SWITCH,
      .intra_bw_Bps = 300e9,
      .intra_latency_s = 1e-6,
      .nics_per_node = 8,
      .inter_bw_Bps = 25e9,
      .inter_latency_s = 2.5e-6}},
    {"8 DGX H100 nodes x 8 H100-SXM5-80GB, NVSwitch 450 GB/s, 8 x NDR InfiniBand 50 GB/s",
     {.name = "dgx-h100",
      .nodes = 8,
      .devices_per_node = 8,
      .kind = {.name = "H100-SXM5-80GB",
               .peak_flops = {67e12, 989e12, 989e12, 494.7e12},
               .mem_bw_Bps = 3350e9,
               .mem_bytes = 80e9},
      .intra = SF_INTRA_SWITCH,
      .intra_bw_Bps = 450e9,
      .intra_latency_s = 1e-6,
      .nics_per_node = 8,
      .inter_bw_Bps = 50e9,
      .inter_latency_s = 2.5e-6}},
    {"1 node x 4 MPI ranks on this host, shared memory (placeholder figures until "
     "`soapflow calibrate`)",
     {.name = "cpu",
      .nodes = 1,
      .devices_per_node = 4,
      .kind =
          {.name = "cpu-rank", .peak_flops = {50e9, 0, 0}, .mem_bw_Bps = 10e9, .mem_bytes = 4e9},
      .intra = SF_INTRA_SHM,
      .intra_bw_Bps = 5e9,
      .intra_latency_s = 1e-6,
      .nics_per_node = 1,
      .inter_bw_Bps = 1.25e9,
      .inter_latency_s = 25e-6}},
};

#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

int sf_machine_preset_count(void) { return N_PRESETS; }

const char *sf_machine_preset_name(int i) {
    if (i < 0 || i >= N_PRESETS) return NULL;
    return presets[i].desc.name;
}

const char *sf_machine_preset_summary(int i) {
    if (i < 0 || i >= N_PRESETS) return NULL;
    return presets[i].summary;
}

sf_status sf_machine_preset_desc(const char *name, sf_machine_desc *out, sf_error *err) {
    if (!name) return sf_error_set(err, SF_ERR_INVALID, "machine preset name is NULL");
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(name, presets[i].desc.name) == 0) {
            *out = presets[i].desc;
            return SF_OK;
        }
    }
    char list[256];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < N_PRESETS && used < sizeof list; i++) {
        int w =
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", presets[i].desc.name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return sf_error_set(err, SF_ERR_NOTFOUND, "unknown machine preset '%s' (presets: %s)", name,
                        list);
}

sf_machine *sf_machine_preset(const char *name, sf_error *err) {
    sf_machine_desc d;
    if (sf_machine_preset_desc(name, &d, err) != SF_OK) return NULL;
    return sf_machine_build(&d, err);
}
