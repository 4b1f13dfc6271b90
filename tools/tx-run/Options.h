//===- Options.h - tx-run's command line ------------------------------------===//
//
// What tx-run's flags ask for (Options) and the parser that checks them:
// every malformed or out-of-range value exits with a one-line message
// naming the flag (tx-run-errors.test).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TOOLS_TX_RUN_OPTIONS_H
#define TXC_TOOLS_TX_RUN_OPTIONS_H

#include "runtime/backends/cuda/CudaExecutor.h" // options only: no CUDA needed
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
  /// What the (cuda) flags set; --device cuda hands it to the backend
  /// (num_kv_pages from --kv-pages, the flag both backends read).
  cuda::CudaExecutorOptions cuda;
  std::string cuda_only_flag; // the first flag given that only --device cuda reads
};

/// Exits with a one-line message naming the flag.
[[noreturn]] void fail(const std::string &message);

/// The flags, checked; --help prints the usage and exits.
Options parseArguments(int argc, char **argv);

} // namespace txc::txrun

#endif // TXC_TOOLS_TX_RUN_OPTIONS_H
