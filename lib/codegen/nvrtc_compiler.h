//===- nvrtc_compiler.h - NVRTC compilation with a content-hash cache -----===//
//
// Compiles a kernel specialization for the target (sm_90a by default) with
// NVRTC and returns the cubin and the kernel's lowered symbol. The embedded
// kernel headers are handed to NVRTC by name, so compilation depends on no
// source tree. Results are cached on disk under the SHA-256 of everything
// that determines the bytes: source, every header, options, the name
// expression and the NVRTC version. Needs NVRTC, not a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "status.h"

namespace txc::codegen {

using kernels::Status;

struct NvrtcOptions {
  std::string arch = "sm_90a";
  std::string cuda_include_dir; // empty: the toolkit this library was built against
  std::vector<std::string> extra_flags;
};

struct CompiledKernel {
  std::string cubin;
  std::string lowered_name;
  std::string cache_key;
  bool from_cache = false;
  /// NVRTC's program log of a fresh compile (empty from the cache): its
  /// warnings, and with --ptxas-options=-v ptxas's register and performance
  /// notes, e.g. C7518 (wgmma serialized).
  std::string log;
};

class KernelCompiler {
public:
  /// cache_dir empty: no disk cache.
  explicit KernelCompiler(std::string cache_dir = "");

  /// The full NVRTC command line for `options`.
  static std::vector<std::string> commandLine(const NvrtcOptions &options);

  /// Key of (source, headers, options, name expression, NVRTC version).
  static std::string cacheKey(const std::string &source, const std::string &name_expression,
                              const NvrtcOptions &options);

  Status compile(const std::string &source, const std::string &name_expression, const NvrtcOptions &options,
                 CompiledKernel *out) const;

private:
  std::string cache_dir_;
};

} // namespace txc::codegen
