//===- Options.h - tx-run's command line ------------------------------------===//
//
// What tx-run's flags ask for (Options) and the parser that checks them:
// every malformed or out-of-range value exits with a one-line message
// naming the flag (tx-run-errors.test).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TOOLS_TX_RUN_OPTIONS_H
#define TXC_TOOLS_TX_RUN_OPTIONS_H

#include "txc/engine/Sampling.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace txc::txrun {

struct Options {
  std::string model;
  std::string device = "cpu";
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompts;
  txc::engine::SamplingParams sampling;
  std::string weights_dir;
  std::optional<uint64_t> random_weights_seed;
  int threads = 0;
  int32_t kv_pages = 0;
  bool json = false;
  bool return_logits = false;
  bool timing = false;
  bool profile_ops = false;
  bool cuda_graphs = true;
  bool pdl = true;
  bool fuse_norms = true;
  bool device_sampling = true;
  bool attention_pdl = true;
  bool fuse_rope = false;
  std::optional<bool> rope_in_attention; // unset: the backend's rule
  std::optional<bool> attention_cluster_combine;
  int attention_cluster_max_splits = 8;
  int gemv_max_rows = 4;
  int decode_split_min_tokens = 0; // 0: the backend's rule
  int decode_min_splits = 1;
  bool tune_decode_attention = false;
  bool tune_gemms = false;
  bool decode_gemm = false;
  bool capture_graphs = true;
  bool skinny_gemm = true;
  bool attention_early_kv = true;
  std::string ablate_decode_attention; // "", "empty" or "none"
  int qkv_carveout = -1, gemv_carveout = -1, attention_carveout = -1; // --carveout
  int decode_attention_warps = 4;
  bool trace_step = false;
  bool attention_late_dependents = false;
  struct GemvConfig {
    int64_t n, k;
    int warps, chunks, warps_per_sm;
  };
  std::vector<GemvConfig> gemv_configs; // --gemv-config, in the order given
  std::string cuda_only_flag; // the first flag given that only --device cuda reads
};

/// Exits with a one-line message naming the flag.
[[noreturn]] void fail(const std::string &message);

/// The flags, checked; --help prints the usage and exits.
Options parseArguments(int argc, char **argv);

} // namespace txc::txrun

#endif // TXC_TOOLS_TX_RUN_OPTIONS_H
