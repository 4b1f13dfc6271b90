//===- StepTrace.h - Summaries of a traced decode step --------------------===//
//
// trace_decode_steps stamps, per kernel of a decode step, when its first and
// last blocks started, when its first block passed its PDL wait and when its
// last block finished (DecodeTraceEntry). What a kernel costs the step is
// not its own duration: behind PDL it starts under its predecessor, and its
// share of the step is the time from the predecessor's end to its own end.
// Host-only, so the arithmetic is tested without a GPU (StepTraceTest).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_STEPTRACE_H
#define TXC_RUNTIME_BACKENDS_CUDA_STEPTRACE_H

#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace txc::cuda {

/// Stamps a traced launch takes (kernels::TraceSlot, device_utils.cuh): ten
/// globaltimer stamps, then kTraceBlock0Points of block 0's SM clock, then
/// kTraceMergerPoints of the merging CTA's (read by attention_bench only).
constexpr int kTraceBlock0Clock = 10;
constexpr int kTraceBlock0Points = 9;
constexpr int kTraceMergerPoints = 4;
constexpr int kTraceSlotsPerLaunch = kTraceBlock0Clock + kTraceBlock0Points + kTraceMergerPoints;

/// Block 0's points (kernels::TraceBlock0Point) after its wait release:
/// fold loaded, fold heads done (warp 0's), query ready, first tile, tiles
/// computed, tiles done, states stored, exit.
using Block0Cycles = std::array<double, kTraceBlock0Points - 1>;

/// One traced kernel of a decode step: microseconds from the step's first
/// traced block start; NaN where the kernel did not stamp it. Only kernels
/// with few blocks (the decode attention) stamp the latest-over-blocks
/// points: latest start and wait release, query ready (after the folded
/// rope) and tiles done (before the epilogue and the split combine); with
/// splits also partials out (each split's partial published) and merge
/// start (the merging CTA knows it merges). The decode attention's block 0
/// also records SM cycles after its own wait release (block0_cycles; NaN
/// where not stamped).
struct DecodeTraceEntry {
  std::string label; // the plan launch and the kernel: "txk.gemm 4096x4096 / gemv"
  double first_entry_us = 0, last_entry_us = 0, wait_release_us = 0, last_exit_us = 0;
  double latest_entry_us = std::nan(""), latest_wait_release_us = std::nan("");
  double query_ready_us = std::nan(""), tiles_done_us = std::nan("");
  double partials_out_us = std::nan(""), merge_start_us = std::nan("");
  Block0Cycles block0_cycles = nanCycles();

  static Block0Cycles nanCycles() {
    Block0Cycles c;
    c.fill(std::nan(""));
    return c;
  }
};

/// The means over a step's kernels of one label, each measured against the
/// traced kernel before it (the first kernel of the step has none and is
/// left out):
/// - share: its last exit minus the previous one's, its part of the step;
/// - wait_latency: its wait release minus the previous last exit, what the
///   dependency costs after the predecessor's last block ends;
/// - early_start: the previous last exit minus its first block start, how
///   long it was resident before its predecessor ended (negative: it
///   started after);
/// - after_wait: its last exit minus its wait release, its own critical
///   path once the dependency resolves;
/// - last_start: its last block's start minus the previous last exit
///   (positive: blocks that could not be resident before the predecessor
///   ended, whose first loads are then on the critical path).
///
/// For kernels with the latest-over-blocks points, their means against the
/// first block's wait release (phase_count of them): the latest block
/// start and wait release, query ready, tiles done; the exit is
/// after_wait_us. Of those with split merges (merge_count), partials out and
/// merge start the same way.
struct TraceKindSummary {
  std::string label;
  int count = 0;
  double share_us = 0, wait_latency_us = 0, early_start_us = 0, after_wait_us = 0;
  double last_start_us = 0;
  int phase_count = 0;
  double latest_entry_us = 0, latest_wait_release_us = 0, query_ready_us = 0, tiles_done_us = 0;
  int merge_count = 0;
  double partials_out_us = 0, merge_start_us = 0;
  int block0_count = 0; // entries with every block-0 point stamped
  Block0Cycles block0_cycles{};
};

/// By label, in order of first appearance; entries with a stamp missing
/// (theirs or the previous kernel's exit) are left out of the means.
std::vector<TraceKindSummary> summarizeDecodeTrace(const std::vector<DecodeTraceEntry> &trace);

/// The summary, then every kernel, as text lines for a terminal.
std::string formatDecodeTrace(const std::vector<DecodeTraceEntry> &trace);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_STEPTRACE_H
