//===- bench.h - What the attention bench's parts share -------------------===//
//
// attention_bench (main.cu) runs the decode cases (decode.cu) and the
// prefill cases (prefill.cu); both check against the fp64 reference and
// record their results here (bench.cu), which main writes as JSON.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "attention/attention.h"
#include "attention_reference.cuh"
#include "cuda_check.h"

#define BENCH_CHECK_STATUS(expr)                                                                   \
  do {                                                                                             \
    Status s_ = (expr);                                                                            \
    if (!s_.isOk()) {                                                                              \
      std::fprintf(stderr, "kernel library error: %s\n", s_.message().c_str());                   \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

namespace txc::bench {

using namespace txc::kernels;

struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { BENCH_CHECK_CUDA(cudaMalloc(&ptr, std::max<size_t>(n, 16))); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr)
      cudaFree(ptr);
  }
  template <typename U> U *as() const { return static_cast<U *>(ptr); }
};

template <typename U> DeviceBuffer upload(const std::vector<U> &host) {
  DeviceBuffer b(host.size() * sizeof(U));
  BENCH_CHECK_CUDA(cudaMemcpy(b.ptr, host.data(), host.size() * sizeof(U), cudaMemcpyHostToDevice));
  return b;
}

extern unsigned long long g_seed;

template <typename T> void fillRandom(const DeviceBuffer &b, long long n, float scale) {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  txc::bench::fillUniformKernel<T><<<1024, 256>>>(b.as<T>(), n, g_seed, scale);
  BENCH_CHECK_CUDA(cudaGetLastError());
}

inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float toFloat(__half x) { return __half2float(x); }

// --------------------------------------------------------------------------
// Results
// --------------------------------------------------------------------------
struct CheckResult {
  std::string name;
  double rel_err = 0, max_abs = 0;
  long long unwritten = 0, checked_rows = 0;
  long long differing = -1; // bit-for-bit checks: elements whose bits differ
  bool pass = false;
};
struct TimingResult {
  std::string kind, name, shape_json;
  double ms = 0, tflops = 0, gbps = 0, pct_copy = 0;
  int splits = 0;
  std::string check;
  bool diagnostic = false; // a measurement that explains a limit, not a target
};
extern std::vector<CheckResult> g_checks;
extern std::vector<TimingResult> g_timings;
extern double g_copy_gbps; // the device copy (read + write) in GB/s, measureCopyBandwidth's

/// Median over batches of back-to-back launches, in ms per launch.
double timeMedianMs(const std::function<void(int)> &launch);
void measureCopyBandwidth();
/// A diagnostic row that times launches alone (no bytes or FLOPs to count).
void recordLaunchTiming(const std::string &name, double ms, const std::string &shape_json);
/// Every check and timing recorded, as results/ JSON.
void writeJson(const char *path);

// --------------------------------------------------------------------------
// KV cache and reference comparison
// --------------------------------------------------------------------------
struct KVCache {
  DeviceBuffer k, v, page_table, kv_lens, cu_seqlens_k;
  KVCacheView view;
  size_t kv_bytes = 0; // bytes of K and V that attention reads
};

/// Paged cache in the HND layout [pages, kv_heads, page_size, d]; pages of a
/// sequence are scattered by a random permutation. page_size 0 = contiguous
/// packed [total_k, kv_heads, d] with cu_seqlens_k. (bf16 and fp16.)
template <typename T>
KVCache makeKVCache(const std::vector<int> &lens, int kv_heads, int head_dim, int page_size, std::mt19937 &rng);

/// Compares rows `sample_tokens` of `out` ([tokens, heads, d]) with the fp64
/// reference and counts elements still holding the NaN poison anywhere.
template <typename T>
CheckResult compareWithReference(const std::string &name, const ReferenceArgs &args, const std::vector<int> &cu_q,
                                 const std::vector<int> &sample_tokens, const DeviceBuffer &out, long long out_elems,
                                 double tolerance);

double toleranceFor(ElementType t);

// The element types the cases below run in.
constexpr ElementType bf16 = ElementType::kBf16, fp16 = ElementType::kFp16;

// The suites, in the order main runs them.
void checkDecodeKernels(std::mt19937 &rng);
void checkPrefillKernels(std::mt19937 &rng);
void timeDecodeTargets(std::mt19937 &rng);
void timeDecodeLaunchChoices(std::mt19937 &rng);
void timeDecodeLatencyDiagnostics(std::mt19937 &rng);
void timePrefill(std::mt19937 &rng);
extern bool g_prefill_compare; // --prefill-compare

} // namespace txc::bench
