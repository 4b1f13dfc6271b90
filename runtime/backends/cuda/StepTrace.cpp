//===- StepTrace.cpp - Summaries of a traced decode step ------------------===//
#include "runtime/backends/cuda/StepTrace.h"

#include <cmath>
#include <cstdio>

namespace txc::cuda {

std::vector<TraceKindSummary> summarizeDecodeTrace(const std::vector<DecodeTraceEntry> &trace) {
  std::vector<TraceKindSummary> kinds;
  for (size_t i = 1; i < trace.size(); ++i) {
    const DecodeTraceEntry &e = trace[i];
    const double previous_exit = trace[i - 1].last_exit_us;
    if (std::isnan(previous_exit) || std::isnan(e.first_entry_us) || std::isnan(e.last_entry_us) ||
        std::isnan(e.wait_release_us) || std::isnan(e.last_exit_us))
      continue;
    TraceKindSummary *kind = nullptr;
    for (TraceKindSummary &k : kinds)
      if (k.label == e.label)
        kind = &k;
    if (!kind) {
      kinds.push_back({e.label});
      kind = &kinds.back();
    }
    ++kind->count;
    bool block0 = true;
    for (double c : e.block0_cycles)
      block0 = block0 && !std::isnan(c);
    if (block0) {
      ++kind->block0_count;
      for (size_t p = 0; p < e.block0_cycles.size(); ++p)
        kind->block0_cycles[p] += e.block0_cycles[p];
    }
    kind->share_us += e.last_exit_us - previous_exit;
    kind->wait_latency_us += e.wait_release_us - previous_exit;
    kind->early_start_us += previous_exit - e.first_entry_us;
    kind->after_wait_us += e.last_exit_us - e.wait_release_us;
    kind->last_start_us += e.last_entry_us - previous_exit;
    if (std::isnan(e.latest_entry_us) || std::isnan(e.latest_wait_release_us) ||
        std::isnan(e.query_ready_us) || std::isnan(e.tiles_done_us))
      continue;
    ++kind->phase_count;
    kind->latest_entry_us += e.latest_entry_us - e.wait_release_us;
    kind->latest_wait_release_us += e.latest_wait_release_us - e.wait_release_us;
    kind->query_ready_us += e.query_ready_us - e.wait_release_us;
    kind->tiles_done_us += e.tiles_done_us - e.wait_release_us;
    if (std::isnan(e.partials_out_us) || std::isnan(e.merge_start_us))
      continue;
    ++kind->merge_count;
    kind->partials_out_us += e.partials_out_us - e.wait_release_us;
    kind->merge_start_us += e.merge_start_us - e.wait_release_us;
  }
  for (TraceKindSummary &k : kinds) {
    k.share_us /= k.count;
    k.wait_latency_us /= k.count;
    k.early_start_us /= k.count;
    k.after_wait_us /= k.count;
    k.last_start_us /= k.count;
    if (k.block0_count > 0)
      for (double &c : k.block0_cycles)
        c /= k.block0_count;
    if (k.phase_count > 0) {
      k.latest_entry_us /= k.phase_count;
      k.latest_wait_release_us /= k.phase_count;
      k.query_ready_us /= k.phase_count;
      k.tiles_done_us /= k.phase_count;
    }
    if (k.merge_count > 0) {
      k.partials_out_us /= k.merge_count;
      k.merge_start_us /= k.merge_count;
    }
  }
  return kinds;
}

std::string formatDecodeTrace(const std::vector<DecodeTraceEntry> &trace) {
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line,
                "decode step trace: %zu kernels; per kind, means in us against the kernel before:\n",
                trace.size());
  text += line;
  std::snprintf(line, sizeof line, "  %-44s %5s %8s %8s %8s %8s %8s\n", "kernel", "count",
                "share", "wait", "early", "after", "last");
  text += line;
  double total = 0;
  const std::vector<TraceKindSummary> kinds = summarizeDecodeTrace(trace);
  for (const TraceKindSummary &k : kinds) {
    std::snprintf(line, sizeof line, "  %-44s %5d %8.2f %8.2f %8.2f %8.2f %8.2f\n",
                  k.label.c_str(), k.count, k.share_us, k.wait_latency_us, k.early_start_us,
                  k.after_wait_us, k.last_start_us);
    text += line;
    total += k.share_us * k.count;
  }
  std::snprintf(line, sizeof line,
                "  (share: last exit after the previous one's; wait: wait release after the "
                "previous exit; early: resident before it; after: exit after the wait; last: "
                "its last block's start after the previous exit; shares sum to %.1f us)\n",
                total);
  text += line;
  for (const TraceKindSummary &k : kinds) {
    if (k.phase_count == 0)
      continue;
    std::snprintf(line, sizeof line,
                  "  %-44s after its first wait release: latest start %.2f, latest wait %.2f, "
                  "query ready %.2f, tiles done %.2f, ",
                  k.label.c_str(), k.latest_entry_us, k.latest_wait_release_us, k.query_ready_us,
                  k.tiles_done_us);
    text += line;
    if (k.merge_count > 0) {
      std::snprintf(line, sizeof line, "partials out %.2f, merge start %.2f, ", k.partials_out_us,
                    k.merge_start_us);
      text += line;
    }
    std::snprintf(line, sizeof line, "exit %.2f us\n", k.after_wait_us);
    text += line;
  }
  for (const TraceKindSummary &k : kinds) {
    if (k.block0_count == 0)
      continue;
    const Block0Cycles &c = k.block0_cycles;
    std::snprintf(line, sizeof line,
                  "  %-44s block 0, SM cycles after its wait release: fold loaded %.0f, heads "
                  "done %.0f, query ready %.0f, first tile %.0f, tiles computed %.0f, tiles done "
                  "%.0f, states stored %.0f, exit %.0f\n",
                  k.label.c_str(), c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
    text += line;
  }
  std::snprintf(line, sizeof line, "  %4s %-44s %9s %9s %9s %9s  %s\n", "#", "kernel", "start",
                "last-start", "wait", "exit",
                "[latest start, latest wait, query ready, tiles done(, partials out, merge start)]");
  text += line;
  for (size_t i = 0; i < trace.size(); ++i) {
    const DecodeTraceEntry &e = trace[i];
    std::snprintf(line, sizeof line, "  %4zu %-44s %9.2f %9.2f %9.2f %9.2f", i, e.label.c_str(),
                  e.first_entry_us, e.last_entry_us, e.wait_release_us, e.last_exit_us);
    text += line;
    if (!std::isnan(e.latest_entry_us)) {
      std::snprintf(line, sizeof line, "  [%.2f, %.2f, %.2f, %.2f", e.latest_entry_us,
                    e.latest_wait_release_us, e.query_ready_us, e.tiles_done_us);
      text += line;
      if (!std::isnan(e.partials_out_us)) {
        std::snprintf(line, sizeof line, ", %.2f, %.2f", e.partials_out_us, e.merge_start_us);
        text += line;
      }
      text += "]";
    }
    text += "\n";
  }
  return text;
}

} // namespace txc::cuda
