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
    if (std::isnan(previous_exit) || std::isnan(e.first_entry_us) || std::isnan(e.wait_release_us) ||
        std::isnan(e.last_exit_us))
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
    kind->share_us += e.last_exit_us - previous_exit;
    kind->wait_latency_us += e.wait_release_us - previous_exit;
    kind->early_start_us += previous_exit - e.first_entry_us;
    kind->after_wait_us += e.last_exit_us - e.wait_release_us;
  }
  for (TraceKindSummary &k : kinds) {
    k.share_us /= k.count;
    k.wait_latency_us /= k.count;
    k.early_start_us /= k.count;
    k.after_wait_us /= k.count;
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
  std::snprintf(line, sizeof line, "  %-44s %5s %8s %8s %8s %8s\n", "kernel", "count", "share",
                "wait", "early", "after");
  text += line;
  double total = 0;
  for (const TraceKindSummary &k : summarizeDecodeTrace(trace)) {
    std::snprintf(line, sizeof line, "  %-44s %5d %8.2f %8.2f %8.2f %8.2f\n", k.label.c_str(),
                  k.count, k.share_us, k.wait_latency_us, k.early_start_us, k.after_wait_us);
    text += line;
    total += k.share_us * k.count;
  }
  std::snprintf(line, sizeof line,
                "  (share: last exit after the previous one's; wait: wait release after the "
                "previous exit; early: resident before it; after: exit after the wait; shares "
                "sum to %.1f us)\n",
                total);
  text += line;
  std::snprintf(line, sizeof line, "  %4s %-44s %9s %9s %9s %9s\n", "#", "kernel", "start",
                "last-start", "wait", "exit");
  text += line;
  for (size_t i = 0; i < trace.size(); ++i) {
    const DecodeTraceEntry &e = trace[i];
    std::snprintf(line, sizeof line, "  %4zu %-44s %9.2f %9.2f %9.2f %9.2f\n", i, e.label.c_str(),
                  e.first_entry_us, e.last_entry_us, e.wait_release_us, e.last_exit_us);
    text += line;
  }
  return text;
}

} // namespace txc::cuda
