//===- attention_bench.cu - Correctness and speed of the attention kernels ===//
//
// One program for the GPU machine. Every case draws fresh random inputs,
// poisons the output with NaN, runs the kernel, and compares every written
// row (or an even sample of rows on the big timed shapes) with the fp64
// reference in attention_reference.cuh. Timed cases run after warm-up as
// batches of back-to-back launches between two CUDA events (the median batch
// is reported); decode rotates over enough KV-cache copies that the working
// set is several times the 60 MB L2. The device-copy bandwidth is measured in
// the same run and is the ceiling decode is judged against.
//
// Usage: attention_bench [--json FILE] [--skip-timing] [--decode-only] [--prefill-only]
//                        [--prefill-compare]
// --prefill-compare also checks and times the prefill kernel that is not the
// default, and at head_dims 64 and 256 the one on FA3's tiles (rows marked
// diagnostic, name suffixed with the kernel).
//
//===----------------------------------------------------------------------===//
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
#include "attention/device_utils.cuh"
#include "attention/pdl_launch.h"
#include "attention_reference.cuh"
#include "cuda_check.h"

using namespace txc::kernels;
using txc::bench::ReferenceArgs;

#define BENCH_CHECK_STATUS(expr)                                                                   \
  do {                                                                                             \
    Status s_ = (expr);                                                                            \
    if (!s_.isOk()) {                                                                              \
      std::fprintf(stderr, "kernel library error: %s\n", s_.message().c_str());                   \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

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

unsigned long long g_seed = 0x5eed0001ull;

__global__ void emptyKernel() {}

/// The chain a batch-1 decode launch cannot avoid in the step's setting
/// (a graph, PDL): its CTAs wait for the launch before, then each thread
/// (with `round_trip`) reads 16 bytes the launch before did not write, as
/// the attention reads Q, and stores them, as it stores its output. Launched
/// with the attention's grid, threads and shared memory.
__global__ void dependentChainKernel(const uint4 *in, uint4 *out, bool round_trip) {
  txc::kernels::pdlLaunchDependents();
  txc::kernels::pdlWait();
  if (round_trip) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = __ldcg(in + i);
  }
}

/// The floor under batch-1 decode: only the reads. CTA (split, kv head)
/// reads the K and V pages of its split (pages_per_split of the sequence's
/// pages, through the page table, one head's 16-byte chunks of each) with 8
/// pages' loads in flight a thread, and folds them into one word so they
/// stay. Launched with attention's shared memory, so as many CTAs share an
/// SM; with PDL each launch lets the next one's CTAs start at once. With
/// `wait_after_first`, a CTA waits for the launch before it
/// (griddepcontrol.wait) once its first 8 pages' loads are out: 64 KB a CTA
/// at d128 and 16-token pages, what the attention's early K/V (two 64-key
/// tiles) has in flight across its wait; the rest follows the wait, as the
/// attention's tiles do.
__global__ void __launch_bounds__(256) pagedReadFloorKernel(const uint4 *k, const uint4 *v, const int *page_table,
                                                            int num_pages, int pages_per_split, int kv_heads,
                                                            int chunks_per_page, bool wait_after_first,
                                                            unsigned *out) {
  txc::kernels::pdlLaunchDependents();
  const int p0 = blockIdx.x * pages_per_split, p1 = min(num_pages, p0 + pages_per_split);
  const int head = blockIdx.y;
  unsigned fold = 0;
  bool waited = !wait_after_first;
  for (int p = p0; p < p1; p += 8)
    for (int c = threadIdx.x; c < chunks_per_page; c += blockDim.x) {
      uint4 a[8], b[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const long long chunk = ((long long)page_table[min(p + i, p1 - 1)] * kv_heads + head) * chunks_per_page + c;
        a[i] = __ldcs(k + chunk);
        b[i] = __ldcs(v + chunk);
      }
      if (!waited) { // the loads above stay in flight across it (a "memory" clobber)
        txc::kernels::pdlWait();
        waited = true;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
        fold ^= a[i].x ^ a[i].y ^ a[i].z ^ a[i].w ^ b[i].x ^ b[i].y ^ b[i].z ^ b[i].w;
    }
  if (fold == 0x9e3779b9u) // (practically never; the compiler cannot know)
    out[blockIdx.y * gridDim.x + blockIdx.x] = fold;
}

template <typename T> void fillRandom(const DeviceBuffer &b, long long n, float scale) {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  txc::bench::fillUniformKernel<T><<<1024, 256>>>(b.as<T>(), n, g_seed, scale);
  BENCH_CHECK_CUDA(cudaGetLastError());
}

float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
float toFloat(__half x) { return __half2float(x); }

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
std::vector<CheckResult> g_checks;
std::vector<TimingResult> g_timings;
double g_copy_gbps = 0;

/// Median over batches of back-to-back launches, in ms per launch.
double timeMedianMs(const std::function<void(int)> &launch) {
  cudaEvent_t a, b;
  BENCH_CHECK_CUDA(cudaEventCreate(&a));
  BENCH_CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    launch(i);
  BENCH_CHECK_CUDA(cudaEventRecord(a));
  launch(0);
  BENCH_CHECK_CUDA(cudaEventRecord(b));
  BENCH_CHECK_CUDA(cudaEventSynchronize(b));
  float probe = 0;
  BENCH_CHECK_CUDA(cudaEventElapsedTime(&probe, a, b));
  const int per_batch = std::clamp((int)(2.0 / std::max(probe, 1e-4f)), 1, 200);
  std::vector<double> samples;
  int call = 0;
  for (int rep = 0; rep < 25; ++rep) {
    BENCH_CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < per_batch; ++i)
      launch(call++);
    BENCH_CHECK_CUDA(cudaEventRecord(b));
    BENCH_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(ms / per_batch);
  }
  BENCH_CHECK_CUDA(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void measureCopyBandwidth() {
  const size_t bytes = size_t(2) << 30;
  DeviceBuffer src(bytes), dst(bytes);
  BENCH_CHECK_CUDA(cudaMemset(src.ptr, 1, bytes));
  double ms = timeMedianMs([&](int) { BENCH_CHECK_CUDA(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice)); });
  g_copy_gbps = 2.0 * bytes / (ms * 1e6);
  std::printf("device copy (read+write): %.0f GB/s\n", g_copy_gbps);
}

// --------------------------------------------------------------------------
// KV cache and reference comparison
// --------------------------------------------------------------------------
struct KVCache {
  DeviceBuffer k, v, page_table, kv_lens, cu_seqlens_k;
  KVCacheView view;
  size_t kv_bytes = 0; // bytes of K and V that attention reads
};

int log2Exact(int x) {
  int l = 0;
  while ((1 << l) < x)
    ++l;
  return l;
}

/// Paged cache in the HND layout [pages, kv_heads, page_size, d]; pages of a
/// sequence are scattered by a random permutation. page_size 0 = contiguous
/// packed [total_k, kv_heads, d] with cu_seqlens_k.
template <typename T>
KVCache makeKVCache(const std::vector<int> &lens, int kv_heads, int head_dim, int page_size, std::mt19937 &rng) {
  KVCache c;
  const int batch = (int)lens.size();
  size_t rows = 0;
  if (page_size > 0) {
    std::vector<int> pages_of(batch);
    int total_pages = 0, max_pages = 1;
    for (int b = 0; b < batch; ++b) {
      pages_of[b] = (lens[b] + page_size - 1) / page_size;
      total_pages += pages_of[b];
      max_pages = std::max(max_pages, pages_of[b]);
    }
    std::vector<int> perm(std::max(total_pages, 1));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> table((size_t)batch * max_pages, 0);
    for (int b = 0, next = 0; b < batch; ++b)
      for (int p = 0; p < pages_of[b]; ++p)
        table[(size_t)b * max_pages + p] = perm[next++];
    rows = (size_t)std::max(total_pages, 1) * page_size;
    c.page_table = upload(table);
    c.view.page_table = c.page_table.as<int>();
    c.view.page_table_stride = max_pages;
    c.view.page_size = page_size;
    c.view.page_size_log2 = log2Exact(page_size);
    c.view.token_stride = head_dim;
    c.view.head_stride = (long long)page_size * head_dim;
    c.view.page_stride = (long long)kv_heads * page_size * head_dim;
    c.view.num_pages = std::max(total_pages, 1);
  } else {
    std::vector<int> cu(batch + 1, 0);
    for (int b = 0; b < batch; ++b)
      cu[b + 1] = cu[b] + lens[b];
    rows = std::max(cu[batch], 1);
    c.cu_seqlens_k = upload(cu);
    c.view.maybe_cu_seqlens_k = c.cu_seqlens_k.as<int>();
    c.view.num_tokens = rows;
    c.view.token_stride = (long long)kv_heads * head_dim;
    c.view.head_stride = head_dim;
  }
  const long long elems = (long long)rows * kv_heads * head_dim;
  c.k = DeviceBuffer(elems * sizeof(T));
  c.v = DeviceBuffer(elems * sizeof(T));
  fillRandom<T>(c.k, elems, 2.0f);
  fillRandom<T>(c.v, elems, 1.0f);
  c.view.k = c.k.ptr;
  c.view.v = c.v.ptr;
  c.kv_lens = upload(lens);
  for (int l : lens)
    c.kv_bytes += 2ull * l * kv_heads * head_dim * sizeof(T);
  return c;
}

/// Compares rows `sample_tokens` of `out` ([tokens, heads, d]) with the fp64
/// reference and counts elements still holding the NaN poison anywhere.
template <typename T>
CheckResult compareWithReference(const std::string &name, const ReferenceArgs &args, const std::vector<int> &cu_q,
                                 const std::vector<int> &sample_tokens, const DeviceBuffer &out, long long out_elems,
                                 double tolerance) {
  std::vector<int> sample_seqs;
  for (int t : sample_tokens)
    sample_seqs.push_back((int)(std::upper_bound(cu_q.begin(), cu_q.end(), t) - cu_q.begin()) - 1);
  const int n = (int)sample_tokens.size(), heads = args.num_qo_heads, d = args.head_dim;
  DeviceBuffer d_tokens = upload(sample_tokens), d_seqs = upload(sample_seqs);
  DeviceBuffer ref((size_t)n * heads * d * sizeof(float));
  DeviceBuffer scratch((size_t)n * heads * std::max(args.max_kv_len, 1) * sizeof(double));
  txc::bench::referenceAttentionKernel<T><<<dim3(n, heads), 256>>>(args, d_tokens.as<int>(), d_seqs.as<int>(),
                                                                     ref.as<float>(), scratch.as<double>());
  BENCH_CHECK_CUDA(cudaGetLastError());
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ref_host((size_t)n * heads * d);
  std::vector<T> out_host(out_elems);
  BENCH_CHECK_CUDA(cudaMemcpy(ref_host.data(), ref.ptr, ref_host.size() * 4, cudaMemcpyDeviceToHost));
  BENCH_CHECK_CUDA(cudaMemcpy(out_host.data(), out.ptr, out_elems * sizeof(T), cudaMemcpyDeviceToHost));
  CheckResult r;
  r.name = name;
  for (long long i = 0; i < out_elems; ++i)
    r.unwritten += std::isnan(toFloat(out_host[i])) ? 1 : 0;
  double err2 = 0, ref2 = 0;
  for (int s = 0; s < n; ++s)
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < d; ++j) {
        double want = ref_host[((size_t)s * heads + h) * d + j];
        double got = toFloat(out_host[((size_t)sample_tokens[s] * heads + h) * d + j]);
        err2 += (got - want) * (got - want);
        ref2 += want * want;
        r.max_abs = std::max(r.max_abs, std::fabs(got - want));
      }
  r.checked_rows = n;
  r.rel_err = std::sqrt(err2 / std::max(ref2, 1e-30));
  r.pass = r.unwritten == 0 && r.rel_err < tolerance && std::isfinite(r.rel_err);
  std::printf("  check %-48s rel_err %.2e max_abs %.2e unwritten %lld  %s\n", name.c_str(), r.rel_err, r.max_abs,
              r.unwritten, r.pass ? "PASS" : "FAIL");
  g_checks.push_back(r);
  return r;
}

double toleranceFor(ElementType t) { return t == ElementType::kBf16 ? 1.5e-2 : 4e-3; }

// --------------------------------------------------------------------------
// Decode
// --------------------------------------------------------------------------
struct DecodeCase {
  std::string name;
  int batch, qo_heads, kv_heads, head_dim, page_size;
  std::vector<int> lens; // per sequence; empty = all `context`
  int context = 0;
  int window_left = -1;
  float softcap = 0.f;
  int forced_splits = 0; // 0: the heuristic
  bool fused_combine = true;
  bool timed = false;
  bool l2_resident = false; // diagnostic: one KV copy, re-read from L2
  bool cuda_graph = false;  // diagnostic: time replays of a graph of kGraphLaunches launches
  bool pdl = false;         // with cuda_graph: launched with PDL, as the CUDA backend does
  bool early_kv = false;    // DecodeParams::kv_before_wait (older keys read before the wait)
  bool cluster_combine = false; // DecodeParams::cluster_combine (splits merged in a cluster)
  int cluster_max_splits = kPortableClusterSplits; // DecodeParams::cluster_max_splits
  bool single_kv_stage = false; // DecodeParams::single_kv_stage
  bool wide_cta = false;        // DecodeParams::wide_cta
  int carveout_percent = -1;    // DecodeParams::carveout_percent
  // Diagnostic, with fused_combine false: the timed launches skip the
  // combine kernel (DecodeParams::diagnostic_skip_combine); the check runs
  // with it.
  bool skip_combine = false;
  // Diagnostic: the timed launches run the fused combine's count only
  // (DecodeParams::diagnostic_count_only); the check runs the whole merge.
  bool count_only = false;
  // DecodeParams::dependents: when the next launch's CTAs may start
  // (with pdl; kAtStart lets them in, and their early loads out, at once).
  DecodeParams::Dependents dependents = DecodeParams::Dependents::kAtStart;
  // Diagnostic, with cuda_graph: after the timing, one replay with every
  // launch stamping its trace slots (DecodeParams::maybe_trace), printed
  // as the phases of a launch against the launch before (printLaunchTrace).
  bool trace = false;
};

constexpr int kGraphLaunches = 20;

/// KV-cache copies a timed case rotates over, so its working set is well
/// past L2 (at most 16).
int kvCopiesFor(size_t kv_bytes) {
  return (int)std::min<size_t>(16, std::max<size_t>(1, (size_t(400) << 20) / kv_bytes));
}

/// kGraphLaunches launches (launch(stream, i)) captured into one graph, on
/// a stream of its own.
struct LaunchGraph {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  explicit LaunchGraph(const std::function<void(cudaStream_t, int)> &launch) {
    BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BENCH_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kGraphLaunches; ++i)
      launch(stream, i);
    BENCH_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    BENCH_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  }
  LaunchGraph(const LaunchGraph &) = delete;
  LaunchGraph &operator=(const LaunchGraph &) = delete;
  ~LaunchGraph() {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
};

/// ms per launch of a LaunchGraph replayed: the host's launch path removed,
/// the GPU-side time of the kernels and the gaps between them left.
double timeGraphReplayMs(const std::function<void(cudaStream_t, int)> &launch) {
  LaunchGraph g(launch);
  return timeMedianMs([&](int) { BENCH_CHECK_CUDA(cudaGraphLaunch(g.exec, 0)); }) / kGraphLaunches;
}

/// A LaunchGraph of decode launches, launch i stamping the
/// kTraceSlotsPerLaunch slots at trace + i * slots (globaltimer ns;
/// device_utils.cuh's TraceSlot), replayed three times on zeroed slots; the
/// last replay's stamps are kept. Prints the mean over launches 4.. of each
/// phase, from the launch before's last exit: where a launch's time goes in
/// the step's setting (the timed figure is this period without the stamps'
/// atomics).
void printLaunchTrace(const std::string &name,
                      const std::function<void(cudaStream_t, int, unsigned long long *)> &launch) {
  constexpr int kSlots = txc::kernels::kTraceSlotsPerLaunch;
  DeviceBuffer trace(sizeof(unsigned long long) * kSlots * kGraphLaunches);
  {
    LaunchGraph g([&](cudaStream_t stream, int i) { launch(stream, i, trace.as<unsigned long long>() + i * kSlots); });
    for (int round = 0; round < 3; ++round) {
      BENCH_CHECK_CUDA(cudaMemsetAsync(trace.ptr, 0, sizeof(unsigned long long) * kSlots * kGraphLaunches, g.stream));
      BENCH_CHECK_CUDA(cudaGraphLaunch(g.exec, g.stream));
    }
    BENCH_CHECK_CUDA(cudaStreamSynchronize(g.stream));
  }
  std::vector<unsigned long long> h(kSlots * kGraphLaunches);
  BENCH_CHECK_CUDA(cudaMemcpy(h.data(), trace.ptr, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
  using namespace txc::kernels;
  // Phases from the launch before's last exit (ns): a stamp of 0 was not taken.
  const std::pair<const char *, int> points[] = {
      {"first block in", kTraceFirstEntry},     {"last block in", kTraceLatestEntry},
      {"block 0 past wait", kTraceWaitRelease}, {"last past wait", kTraceLatestWaitRelease},
      {"last query ready", kTraceLatestMarkA},  {"last tiles done", kTraceLatestMarkB},
      {"last partial out", kTraceLatestMarkC},  {"last merger knows", kTraceLatestMarkD},
      {"last exit", kTraceLastExit}};
  std::printf("  trace %s (us after the launch before's last exit, mean of launches 4-%d):", name.c_str(),
              kGraphLaunches - 1);
  for (const auto &[label, slot] : points) {
    double sum = 0;
    int n = 0;
    for (int i = 4; i < kGraphLaunches; ++i) {
      const unsigned long long before = h[(i - 1) * kSlots + kTraceLastExit], at = h[i * kSlots + slot];
      if (before != 0 && at != 0) {
        sum += (double)(long long)(at - before);
        ++n;
      }
    }
    if (n > 0)
      std::printf(" %s %.2f;", label, sum / n / 1e3);
  }
  std::printf("\n");
  // One CTA's SM-clock stamps (slots from `base`) after its stamp `from`,
  // means over launches 4 on; a line only where the kernel took them.
  auto printClockPhases = [&](const char *title, int base, int from,
                              std::initializer_list<std::pair<const char *, int>> points) {
    bool any = false;
    for (const auto &[label, point] : points) {
      double sum = 0;
      int n = 0;
      for (int i = 4; i < kGraphLaunches; ++i) {
        const unsigned long long *clock = &h[i * kSlots + base];
        if (clock[from] != 0 && clock[point] != 0) {
          sum += (double)(long long)(clock[point] - clock[from]);
          ++n;
        }
      }
      if (n == 0)
        continue;
      if (!any)
        std::printf("  trace %s %s:", name.c_str(), title);
      any = true;
      std::printf(" %s %.0f;", label, sum / n);
    }
    if (any)
      std::printf("\n");
  };
  // Block 0 (split 0 of sequence 0's KV head 0: the oldest keys, so never
  // the newest key's CTA), where the kernel stamps it (decode_mma.cuh's
  // stampBlock0; the merger may be another CTA).
  printClockPhases("block 0 (cycles after its wait, mean)", kTraceBlock0Clock, kBlock0WaitRelease,
                   {{"query ready", kBlock0QueryReady},
                    {"first tile landed", kBlock0FirstTile},
                    {"tiles computed", kBlock0TilesComputed},
                    {"tiles done", kBlock0TilesDone},
                    {"states stored", kBlock0StatesStored},
                    {"exit", kBlock0Exit}});
  // The merger of sequence 0's KV head 0.
  printClockPhases("merger (cycles after it knows, mean)", kTraceMergerClock, kMergerKnows,
                   {{"issued", kMergerIssued}, {"landed", kMergerLanded}, {"merged", kMergerMerged}});
}

/// Every split merge (staged, from global memory, across a cluster, or
/// combineSplitsKernel) runs combineSplits' operations in its order, so a
/// fused merge's output `o` (from `fused`) must be the same bits as the
/// combine kernel's on the same inputs, launched here into `o` poisoned.
/// Recorded as a check with the count of elements whose bits differ.
template <typename T>
void checkSameBitsAsCombineKernel(const std::string &name, const AttentionConfig &config, DecodeParams fused,
                                  const DeviceBuffer &o, long long elems) {
  std::vector<T> want(elems), got(elems);
  BENCH_CHECK_CUDA(cudaMemcpy(want.data(), o.ptr, elems * sizeof(T), cudaMemcpyDeviceToHost));
  DecodeParams separate = fused;
  separate.maybe_split_counters = nullptr;
  separate.cluster_combine = false;
  BENCH_CHECK_CUDA(cudaMemset(o.ptr, 0xFF, elems * sizeof(T)));
  BENCH_CHECK_STATUS(launchPagedDecode(config, separate, 0));
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());
  BENCH_CHECK_CUDA(cudaMemcpy(got.data(), o.ptr, elems * sizeof(T), cudaMemcpyDeviceToHost));
  CheckResult r;
  r.name = name + " bits = combine-kernel's";
  r.differing = 0;
  for (long long i = 0; i < elems; ++i) {
    r.differing += std::memcmp(&want[i], &got[i], sizeof(T)) != 0 ? 1 : 0;
    r.unwritten += std::isnan(toFloat(got[i])) ? 1 : 0;
  }
  r.checked_rows = elems / config.head_dim;
  r.pass = r.differing == 0 && r.unwritten == 0;
  std::printf("  check %-48s elements differing %lld unwritten %lld  %s\n", r.name.c_str(), r.differing,
              r.unwritten, r.pass ? "PASS" : "FAIL");
  g_checks.push_back(r);
}

/// Checks the case against the reference; for a timed case prints and records the timing and
/// returns the median launch in ms (0 when untimed).
template <typename T> double runDecode(const DecodeCase &c, ElementType dtype, std::mt19937 &rng) {
  std::vector<int> lens = c.lens.empty() ? std::vector<int>(c.batch, c.context) : c.lens;
  const int batch = (int)lens.size();
  const int max_len = *std::max_element(lens.begin(), lens.end());
  AttentionConfig config{dtype, c.head_dim, false};

  // Timed cases rotate over copies so the working set is well past L2.
  KVCache first = makeKVCache<T>(lens, c.kv_heads, c.head_dim, c.page_size, rng);
  int copies = c.timed && !c.l2_resident ? kvCopiesFor(first.kv_bytes) : 1;
  std::vector<KVCache> caches;
  caches.push_back(std::move(first));
  for (int i = 1; i < copies; ++i)
    caches.push_back(makeKVCache<T>(lens, c.kv_heads, c.head_dim, c.page_size, rng));

  const long long q_elems = (long long)batch * c.qo_heads * c.head_dim;
  DeviceBuffer q(q_elems * sizeof(T)), o(q_elems * sizeof(T));
  fillRandom<T>(q, q_elems, 1.0f);

  int splits = c.forced_splits;
  if (splits == 0)
    BENCH_CHECK_STATUS(planDecodeSplits(config, batch, c.qo_heads, c.kv_heads, max_len, &splits));
  DecodeWorkspaceLayout ws = decodeWorkspaceLayout(batch, c.qo_heads, c.kv_heads, c.head_dim, splits);
  DeviceBuffer workspace(ws.total_bytes);
  BENCH_CHECK_CUDA(cudaMemset(workspace.ptr, 0, ws.total_bytes));

  auto paramsFor = [&](const KVCache &cache) {
    DecodeParams p;
    p.q = q.ptr;
    p.q_batch_stride = (long long)c.qo_heads * c.head_dim;
    p.q_head_stride = c.head_dim;
    p.o = o.ptr;
    p.o_batch_stride = p.q_batch_stride;
    p.o_head_stride = c.head_dim;
    p.kv = cache.view;
    p.kv_lens = cache.kv_lens.as<int>();
    p.batch = batch;
    p.num_qo_heads = c.qo_heads;
    p.num_kv_heads = c.kv_heads;
    p.variant.sm_scale = 1.f / std::sqrt((float)c.head_dim);
    p.variant.sm_scale_log2 = p.variant.sm_scale * 1.4426950408889634f;
    p.variant.softcap = c.softcap;
    p.variant.window_left = c.window_left;
    p.num_splits = splits;
    p.programmatic_launch = c.pdl;
    p.kv_before_wait = c.early_kv;
    p.cluster_combine = c.cluster_combine;
    p.cluster_max_splits = c.cluster_max_splits;
    p.single_kv_stage = c.single_kv_stage;
    p.wide_cta = c.wide_cta;
    p.carveout_percent = c.carveout_percent;
    p.dependents = c.dependents;
    if (splits > 1) {
      p.maybe_partial_o = reinterpret_cast<float *>(workspace.as<char>() + ws.partial_o_offset);
      p.maybe_partial_lse = reinterpret_cast<float *>(workspace.as<char>() + ws.partial_lse_offset);
      if (c.fused_combine)
        p.maybe_split_counters = reinterpret_cast<unsigned *>(workspace.as<char>() + ws.counters_offset);
    }
    return p;
  };

  const bool in_cluster =
      c.cluster_combine && splits >= 2 && splits <= std::min(c.cluster_max_splits, kMaxClusterSplits);
  const std::string name = c.name + " " + elementTypeName(dtype) + " splits=" + std::to_string(splits) +
                           (splits > 1 ? (in_cluster ? " cluster" : c.fused_combine ? " fused" : " combine-kernel")
                                       : "");
  // Two launches on poisoned output: the second checks that the fused
  // combine's counters were reset by the first.
  for (int round = 0; round < 2; ++round) {
    BENCH_CHECK_CUDA(cudaMemset(o.ptr, 0xFF, q_elems * sizeof(T)));
    BENCH_CHECK_STATUS(launchPagedDecode(config, paramsFor(caches[0]), 0));
  }
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());

  ReferenceArgs ra;
  ra.q = q.ptr;
  ra.q_token_stride = (long long)c.qo_heads * c.head_dim;
  ra.q_head_stride = c.head_dim;
  ra.kv = caches[0].view;
  std::vector<int> cu_q(batch + 1);
  std::iota(cu_q.begin(), cu_q.end(), 0);
  DeviceBuffer d_cu_q = upload(cu_q);
  ra.cu_seqlens_q = d_cu_q.as<int>();
  ra.kv_lens = caches[0].kv_lens.as<int>();
  ra.num_qo_heads = c.qo_heads;
  ra.num_kv_heads = c.kv_heads;
  ra.head_dim = c.head_dim;
  ra.window_left = c.window_left;
  ra.softcap = c.softcap;
  ra.sm_scale = 1.0 / std::sqrt((double)c.head_dim);
  ra.max_kv_len = max_len;
  std::vector<int> samples;
  for (int b = 0; b < batch; b += std::max(1, batch / 16))
    samples.push_back(b);
  if (samples.back() != batch - 1)
    samples.push_back(batch - 1);
  CheckResult check = compareWithReference<T>("decode " + name, ra, cu_q, samples, o, q_elems, toleranceFor(dtype));
  if (splits > 1 && c.fused_combine)
    checkSameBitsAsCombineKernel<T>("decode " + name, config, paramsFor(caches[0]), o, q_elems);

  if (!c.timed)
    return 0;
  std::vector<DecodeParams> params;
  for (auto &cache : caches) {
    params.push_back(paramsFor(cache));
    params.back().diagnostic_skip_combine = c.skip_combine;
    params.back().diagnostic_count_only = c.count_only;
  }
  double ms = 0;
  if (c.cuda_graph) {
    ms = timeGraphReplayMs([&](cudaStream_t stream, int i) {
      BENCH_CHECK_STATUS(launchPagedDecode(config, params[i % params.size()], stream));
    });
    if (c.trace)
      printLaunchTrace(c.name, [&](cudaStream_t stream, int i, unsigned long long *trace) {
        DecodeParams p = params[i % params.size()];
        p.maybe_trace = trace;
        BENCH_CHECK_STATUS(launchPagedDecode(config, p, stream));
      });
  } else {
    ms = timeMedianMs([&](int i) { BENCH_CHECK_STATUS(launchPagedDecode(config, params[i % params.size()], 0)); });
  }
  TimingResult t;
  t.kind = "decode";
  t.name = c.name;
  t.diagnostic = c.l2_resident || c.name.find("diag") != std::string::npos;
  t.ms = ms;
  t.splits = splits;
  t.gbps = caches[0].kv_bytes / (ms * 1e6);
  t.pct_copy = 100.0 * t.gbps / g_copy_gbps;
  t.check = check.pass ? "pass" : "FAIL";
  char shape[256];
  std::snprintf(shape, sizeof shape,
                "{\"batch\": %d, \"context\": %d, \"qo_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
                "\"page_size\": %d, \"dtype\": \"%s\", \"kv_copies_rotated\": %d}",
                batch, max_len, c.qo_heads, c.kv_heads, c.head_dim, c.page_size, elementTypeName(dtype), copies);
  t.shape_json = shape;
  std::printf("  time  %-40s %9.4f ms %8.0f GB/s (%5.1f%% of copy) splits %d\n", c.name.c_str(), ms, t.gbps,
              t.pct_copy, splits);
  g_timings.push_back(t);
  return ms;
}

/// A diagnostic row that times launches alone (no bytes or FLOPs to count).
void recordLaunchTiming(const std::string &name, double ms, const std::string &shape_json) {
  TimingResult t;
  t.kind = "launch";
  t.name = name;
  t.diagnostic = true;
  t.ms = ms;
  t.check = "n/a";
  t.shape_json = shape_json;
  std::printf("  time  %-40s %9.4f ms\n", t.name.c_str(), ms);
  g_timings.push_back(t);
}

/// Times pagedReadFloorKernel on batch 1's K/V at `context` (GQA 32/8's 8
/// KV heads, d128, 16-token pages) in `splits` splits, replayed from a graph
/// like the decode rows, over as many cache copies; `smem_bytes` of shared
/// memory a CTA sets how many share an SM (the decode kernel's ~105 KB: two).
void runReadFloor(int context, int splits, int smem_bytes, bool pdl, std::mt19937 &rng, bool wait_after_first = false) {
  constexpr int kKvHeads = 8, kHeadDim = 128, kPage = 16;
  std::vector<KVCache> caches;
  caches.push_back(makeKVCache<__nv_bfloat16>({context}, kKvHeads, kHeadDim, kPage, rng));
  const size_t kv_bytes = caches[0].kv_bytes;
  const int copies = kvCopiesFor(kv_bytes);
  for (int i = 1; i < copies; ++i)
    caches.push_back(makeKVCache<__nv_bfloat16>({context}, kKvHeads, kHeadDim, kPage, rng));
  const int pages = (context + kPage - 1) / kPage, pages_per_split = (pages + splits - 1) / splits;
  const int chunks_per_page = kPage * kHeadDim * 2 / 16;
  DeviceBuffer out(sizeof(unsigned) * splits * kKvHeads);
  BENCH_CHECK_CUDA(cudaFuncSetAttribute(pagedReadFloorKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  const double ms = timeGraphReplayMs([&](cudaStream_t stream, int i) {
    const KVCache &c = caches[i % copies];
    BENCH_CHECK_CUDA(launchKernel(pagedReadFloorKernel, dim3(splits, kKvHeads), dim3(256), smem_bytes, stream, pdl,
                                  static_cast<const uint4 *>(c.view.k), static_cast<const uint4 *>(c.view.v),
                                  c.view.page_table, pages, pages_per_split, kKvHeads, chunks_per_page,
                                  wait_after_first, out.as<unsigned>()));
  });
  TimingResult t;
  t.kind = "decode";
  t.name = "diag b1 L" + std::to_string(context) + " read floor, " + std::to_string(smem_bytes / 1024) +
           " KB a CTA" + (pdl ? ", graph+pdl" : ", graph") + (wait_after_first ? ", wait after 64 KB" : "");
  t.diagnostic = true;
  t.ms = ms;
  t.splits = splits;
  t.gbps = kv_bytes / (ms * 1e6);
  t.pct_copy = 100.0 * t.gbps / g_copy_gbps;
  t.check = "n/a";
  char shape[192];
  std::snprintf(shape, sizeof shape,
                "{\"batch\": 1, \"context\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"page_size\": %d, "
                "\"kv_copies_rotated\": %d}",
                context, kKvHeads, kHeadDim, kPage, copies);
  t.shape_json = shape;
  std::printf("  time  %-40s %9.4f ms %8.0f GB/s (%5.1f%% of copy) splits %d\n", t.name.c_str(), ms, t.gbps,
              t.pct_copy, splits);
  g_timings.push_back(t);
}

// --------------------------------------------------------------------------
// Prefill
// --------------------------------------------------------------------------
struct PrefillCase {
  std::string name;
  int qo_heads, kv_heads, head_dim;
  std::vector<int> q_lens, kv_lens; // kv_lens empty: same as q_lens
  bool causal = false;
  int page_size = 0; // 0: contiguous packed K/V
  int window_left = -1;
  float softcap = 0.f;
  bool timed = false;
  bool phase_trace = false; // also run PrefillKernel::kWarpSpecializedPhaseTrace (bf16 d128)
};

/// The stream-K tail's parts (PrefillParams::tail_tiles), in SM cycles: for
/// parts without step 0, their key blocks and the time from their last P V
/// to their state stored and counted; for owners, from the last P V to the
/// others merged (the wait included) and on to the epilogue's end; and per
/// CTA, the tail's span, from its last whole tile's end to its last
/// epilogue's (against a whole tile: its last tile's own span).
void printTailTrace(const std::string &name, const std::vector<long long> &trace, int ctas, int tiles, int consumer) {
  double waiter_blocks = 0, waiter_store = 0, owner_blocks = 0, owner_merges = 0, owner_merge = 0, owner_finish = 0;
  double span = 0, span_max = 0, whole = 0;
  long long waiters = 0, owners = 0, spans = 0, slowest_start = 0;
  int slowest = -1;
  for (int cta = 0; cta < ctas; ++cta) {
    long long last_whole_end = 0, last_whole_span = 0, tail_end = 0;
    for (int tile = 0; tile < tiles; ++tile) {
      const long long *row = &trace[((size_t(cta) * tiles + tile) * kMaxPrefillConsumers + consumer) * kPrefillTraceSlots];
      if (row[kPhaseEpilogue] == 0)
        continue;
      const long long role = row[kPhaseTailRole];
      if (role == 0) {
        last_whole_end = row[kPhaseEpilogue];
        last_whole_span = row[kPhaseEpilogue] - row[kPhaseTileStart];
        continue;
      }
      tail_end = row[kPhaseEpilogue];
      if (role == 1) {
        waiter_blocks += row[kPhaseKeyBlocks];
        waiter_store += row[kPhaseTailMerged] - row[kPhaseLastPV];
        ++waiters;
      } else {
        owner_blocks += row[kPhaseKeyBlocks];
        owner_merges += role - 2;
        owner_merge += row[kPhaseTailMerged] - row[kPhaseLastPV];
        owner_finish += row[kPhaseEpilogue] - row[kPhaseTailMerged];
        ++owners;
      }
    }
    if (tail_end != 0 && last_whole_end != 0) {
      span += tail_end - last_whole_end;
      if (tail_end - last_whole_end > span_max) {
        span_max = double(tail_end - last_whole_end);
        slowest = cta;
        slowest_start = last_whole_end;
      }
      whole += last_whole_span;
      ++spans;
    }
  }
  if (waiters + owners == 0)
    return;
  std::printf("  phases %s consumer %d tail: %lld parts without step 0 (%.1f key blocks, last P V to stored and "
              "counted %.0f); %lld owners (%.1f key blocks, %.2f merges, last P V to merged %.0f, then to the "
              "epilogue's end %.0f); a CTA's tail %.0f (max %.0f) against its last whole tile's %.0f\n",
              name.c_str(), consumer, waiters, waiters ? waiter_blocks / waiters : 0.0,
              waiters ? waiter_store / waiters : 0.0, owners, owners ? owner_blocks / owners : 0.0,
              owners ? owner_merges / owners : 0.0, owners ? owner_merge / owners : 0.0,
              owners ? owner_finish / owners : 0.0, spans ? span / spans : 0.0, span_max,
              spans ? whole / spans : 0.0);
  // The slowest CTA's tail, part by part (cycles from its last whole
  // tile's end): what sets the launch's end.
  for (int tile = 0; slowest >= 0 && tile < tiles; ++tile) {
    const long long *row =
        &trace[((size_t(slowest) * tiles + tile) * kMaxPrefillConsumers + consumer) *
               kPrefillTraceSlots];
    if (row[kPhaseEpilogue] == 0 || row[kPhaseTailRole] == 0)
      continue;
    auto at = [&](int phase) { return row[phase] != 0 ? row[phase] - slowest_start : -1; };
    std::printf(
        "  phases %s consumer %d slowest tail (CTA %d) part: %s, %lld key blocks, %lld merges; "
        "start %lld, "
        "Q ready %lld, first step %lld, steps done %lld, last P V %lld, %s %lld, end %lld\n",
        name.c_str(), consumer, slowest, row[kPhaseTailRole] == 1 ? "without step 0" : "owner",
        row[kPhaseKeyBlocks], row[kPhaseTailRole] >= 2 ? row[kPhaseTailRole] - 2 : 0,
        at(kPhaseTileStart), at(kPhaseQReady), at(kPhaseFirstStep), at(kPhaseMainLoop),
        at(kPhaseLastPV), row[kPhaseTailRole] == 1 ? "stored and counted" : "merged",
        at(kPhaseTailMerged), at(kPhaseEpilogue));
  }
}

/// Where a consumer's tile time goes (PrefillKernel::kWarpSpecializedPhaseTrace,
/// one launch after the timed ones): SM cycles from the tile's start to its Q
/// in shared memory, through the first step (Q K^T and softmax alone), each
/// later step (with two Q buffers the first of them also loads the next
/// tile's Q), the last P V alone and the epilogue (the next tile's first
/// Q K^T issued, or with one Q buffer its Q load, then O stored); the gap
/// from one tile's
/// end to the next one's start; the first tile of a CTA apart (pipeline
/// fill). Means over every stamped tile of every CTA, consumer by consumer.
/// Stream-K tail parts apart (printTailTrace).
void printPhaseTrace(const std::string &name, const std::vector<long long> &trace, int ctas, int tiles) {
  for (int consumer = 0; consumer < kMaxPrefillConsumers; ++consumer) {
    double sum[7] = {}, first_sum[5] = {}, gap = 0, first = 0, lookup = 0, middle = 0,
           last_step = 0, o_store = 0;
    long long count = 0, steps = 0, gaps = 0, firsts = 0, split = 0, middle_steps = 0, o_stores = 0;
    for (int cta = 0; cta < ctas; ++cta)
      for (int tile = 0; tile < tiles; ++tile) {
        const long long *row = &trace[((size_t(cta) * tiles + tile) * kMaxPrefillConsumers + consumer) * kPrefillTraceSlots];
        const long long blocks = row[kPhaseKeyBlocks];
        bool complete = blocks > 1 && row[kPhaseTailRole] == 0;
        for (int ph = kPhaseTileStart; ph <= kPhaseEpilogue; ++ph)
          complete = complete && row[ph] != 0;
        if (!complete)
          continue;
        if (tile == 0) {
          first += row[kPhaseEpilogue] - row[kPhaseTileStart];
          first_sum[0] += row[kPhaseQReady] - row[kPhaseTileStart];
          first_sum[1] += row[kPhaseFirstStep] - row[kPhaseQReady];
          first_sum[2] += row[kPhaseMainLoop] - row[kPhaseFirstStep];
          first_sum[3] += row[kPhaseLastPV] - row[kPhaseMainLoop];
          first_sum[4] += row[kPhaseEpilogue] - row[kPhaseLastPV];
          ++firsts;
          continue;
        }
        const long long *before = row - kMaxPrefillConsumers * kPrefillTraceSlots;
        if (before[kPhaseEpilogue] != 0) {
          gap += row[kPhaseTileStart] - before[kPhaseEpilogue];
          ++gaps;
        }
        sum[0] += row[kPhaseQReady] - row[kPhaseTileStart];
        sum[1] += row[kPhaseFirstStep] - row[kPhaseQReady];
        sum[2] += row[kPhaseMainLoop] - row[kPhaseFirstStep];
        sum[3] += row[kPhaseLastPV] - row[kPhaseMainLoop];
        sum[4] += row[kPhaseEpilogue] - row[kPhaseLastPV];
        sum[5] += row[kPhaseEpilogue] - row[kPhaseTileStart];
        sum[6] += row[kPhaseNextQIssued] - row[kPhaseLastPV];
        steps += blocks - 1;
        ++count;
        if (row[kPhaseOStored] != 0) {
          o_store += row[kPhaseOStored] - row[kPhaseNextQIssued];
          ++o_stores;
        }
        if (row[kPhaseNextFound] != 0 && row[kPhaseLastStep] != 0 && blocks > 2) {
          lookup += row[kPhaseNextFound] - row[kPhaseFirstStep];
          middle += row[kPhaseLastStep] - row[kPhaseNextFound];
          last_step += row[kPhaseMainLoop] - row[kPhaseLastStep];
          middle_steps += blocks - 2;
          ++split;
        }
      }
    if (count == 0)
      continue;
    std::printf("  phases %s consumer %d: %lld tiles, cycles a tile: Q wait %.0f, first step %.0f, later steps "
                "%.0f (%.0f a step), last P V %.0f, epilogue %.0f (next tile's Q K^T or Q issued %.0f, O stored %.0f), "
                "total %.0f; gap to the next tile %.0f; a CTA's first tile %.0f\n",
                name.c_str(), consumer, count, sum[0] / count, sum[1] / count, sum[2] / count,
                steps ? sum[2] / steps : 0.0, sum[3] / count, sum[4] / count, sum[6] / count,
                (sum[4] - sum[6]) / count, sum[5] / count,
                gaps ? gap / gaps : 0.0, firsts ? first / firsts : 0.0);
    // The first tile apart: what a launch's start costs over a later tile
    // (~9K cycles at every length in run 293).
    if (firsts > 0)
      std::printf("  phases %s consumer %d first tile: Q wait %.0f, first step %.0f, later steps "
                  "%.0f, last P V "
                  "%.0f, epilogue %.0f\n",
                  name.c_str(), consumer, first_sum[0] / firsts, first_sum[1] / firsts,
                  first_sum[2] / firsts, first_sum[3] / firsts, first_sum[4] / firsts);
    if (split > 0)
      std::printf("  phases %s consumer %d later steps: the next tile's lookup %.0f, steps 1 to n-2 %.0f a step, "
                  "the last step %.0f\n",
                  name.c_str(), consumer, lookup / split, middle / middle_steps, last_step / split);
    if (o_stores > 0)
      std::printf("  phases %s consumer %d epilogue: O's store issued %.0f after the next Q K^T, then the next "
                  "tile's first softmax %.0f\n",
                  name.c_str(), consumer, o_store / o_stores, (sum[4] - sum[6]) / count - o_store / o_stores);
    printTailTrace(name, trace, ctas, tiles, consumer);
  }
}


template <typename T>
void runPrefill(const PrefillCase &c, ElementType dtype, std::mt19937 &rng, PrefillKernel kernel = PrefillKernel::kAuto,
                const std::string &suffix = "", bool kv_tma = true, bool stream_k_tail = false,
                bool q_l2_prefetch = true) {
  const std::vector<int> &q_lens = c.q_lens;
  const std::vector<int> kv_lens = c.kv_lens.empty() ? c.q_lens : c.kv_lens;
  const int batch = (int)q_lens.size();
  std::vector<int> cu_q(batch + 1, 0);
  for (int b = 0; b < batch; ++b)
    cu_q[b + 1] = cu_q[b] + q_lens[b];
  const int total_q = cu_q[batch];
  const int max_q = *std::max_element(q_lens.begin(), q_lens.end());
  const int max_kv = *std::max_element(kv_lens.begin(), kv_lens.end());
  AttentionConfig config{dtype, c.head_dim, c.causal, kernel};
  config.prefill_kv_tma = kv_tma;

  KVCache cache = makeKVCache<T>(kv_lens, c.kv_heads, c.head_dim, c.page_size, rng);
  const long long q_elems = (long long)total_q * c.qo_heads * c.head_dim;
  DeviceBuffer q(q_elems * sizeof(T)), o(q_elems * sizeof(T));
  fillRandom<T>(q, q_elems, 1.0f);
  DeviceBuffer d_cu_q = upload(cu_q);

  PrefillParams p;
  p.q = q.ptr;
  p.q_token_stride = (long long)c.qo_heads * c.head_dim;
  p.q_head_stride = c.head_dim;
  p.num_q_tokens = total_q;
  p.q_l2_prefetch = q_l2_prefetch;
  p.o = o.ptr;
  p.o_token_stride = p.q_token_stride;
  p.o_head_stride = c.head_dim;
  p.kv = cache.view;
  p.cu_seqlens_q = d_cu_q.as<int>();
  p.maybe_kv_lens = cache.kv_lens.as<int>();
  p.batch = batch;
  p.num_qo_heads = c.qo_heads;
  p.num_kv_heads = c.kv_heads;
  p.max_seqlen_q = max_q;
  p.variant.sm_scale = 1.f / std::sqrt((float)c.head_dim);
  p.variant.sm_scale_log2 = p.variant.sm_scale * 1.4426950408889634f;
  p.variant.softcap = c.softcap;
  p.variant.window_left = c.window_left;
  // The stream-K tail's buffers (PrefillParams::maybe_tail_workspace): the
  // caller vouches that every tile has the same key blocks.
  DeviceBuffer tail_workspace, tail_counters;
  if (stream_k_tail) {
    int device = 0, sms = 0;
    BENCH_CHECK_CUDA(cudaGetDevice(&device));
    BENCH_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    tail_workspace = DeviceBuffer(prefillTailWorkspaceFloats(sms) * sizeof(float));
    tail_counters = DeviceBuffer(prefillTailCounters(sms) * sizeof(unsigned));
    BENCH_CHECK_CUDA(cudaMemset(tail_counters.ptr, 0, prefillTailCounters(sms) * sizeof(unsigned)));
    p.maybe_tail_workspace = tail_workspace.as<float>();
    p.maybe_tail_counters = tail_counters.as<unsigned>();
  }

  BENCH_CHECK_CUDA(cudaMemset(o.ptr, 0xFF, q_elems * sizeof(T)));
  BENCH_CHECK_STATUS(launchPrefill(config, p, 0));
  BENCH_CHECK_CUDA(cudaDeviceSynchronize());

  ReferenceArgs ra;
  ra.q = q.ptr;
  ra.q_token_stride = p.q_token_stride;
  ra.q_head_stride = c.head_dim;
  ra.kv = cache.view;
  ra.cu_seqlens_q = d_cu_q.as<int>();
  ra.kv_lens = cache.kv_lens.as<int>();
  ra.num_qo_heads = c.qo_heads;
  ra.num_kv_heads = c.kv_heads;
  ra.head_dim = c.head_dim;
  ra.causal = c.causal;
  ra.window_left = c.window_left;
  ra.softcap = c.softcap;
  ra.sm_scale = 1.0 / std::sqrt((double)c.head_dim);
  ra.max_kv_len = max_kv;
  // Every row on small cases; on big ones an even sample plus each sequence's
  // first and last rows (the mask edges).
  std::vector<int> samples;
  const int budget = 384;
  if (total_q <= budget) {
    samples.resize(total_q);
    std::iota(samples.begin(), samples.end(), 0);
  } else {
    for (int i = 0; i < budget; ++i)
      samples.push_back((int)((long long)i * total_q / budget) + (i * 7) % 5);
    for (int b = 0; b < batch; ++b) {
      samples.push_back(cu_q[b]);
      samples.push_back(cu_q[b + 1] - 1);
    }
    for (int &s : samples)
      s = std::min(s, total_q - 1);
  }
  const std::string name = c.name + suffix + " " + elementTypeName(dtype);
  CheckResult check = compareWithReference<T>("prefill " + name, ra, cu_q, samples, o, q_elems, toleranceFor(dtype));

  if (!c.timed)
    return;
  double ms = timeMedianMs([&](int) { BENCH_CHECK_STATUS(launchPrefill(config, p, 0)); });
  double flops = 0;
  for (int b = 0; b < batch; ++b)
    flops += 4.0 * c.qo_heads * (double)q_lens[b] * kv_lens[b] * c.head_dim;
  if (c.causal)
    flops /= 2;
  TimingResult t;
  t.kind = "prefill";
  t.name = c.name + suffix;
  // The non-default kernel, or a shape that explains a limit.
  t.diagnostic = !suffix.empty() || c.name.find("diag") != std::string::npos;
  t.ms = ms;
  t.tflops = flops / (ms * 1e9);
  t.check = check.pass ? "pass" : "FAIL";
  char shape[256];
  std::snprintf(shape, sizeof shape,
                "{\"batch\": %d, \"seqlen\": %d, \"qo_heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
                "\"causal\": %s, \"page_size\": %d, \"dtype\": \"%s\"}",
                batch, max_q, c.qo_heads, c.kv_heads, c.head_dim, c.causal ? "true" : "false", c.page_size,
                elementTypeName(dtype));
  t.shape_json = shape;
  std::printf("  time  %-40s %9.4f ms %8.1f TFLOP/s\n", t.name.c_str(), ms, t.tflops);
  g_timings.push_back(t);

  if (c.phase_trace && std::is_same_v<T, __nv_bfloat16> && c.head_dim == 128) {
    // Launched as the timed kernel, with the stamps compiled in; timed too,
    // so the stamps' own cost shows against the row above.
    AttentionConfig traced = config;
    traced.prefill_kernel = PrefillKernel::kWarpSpecializedPhaseTrace;
    const int tiles_per_cta = 64;
    const int max_ctas = ceilDiv(max_q, 128) * c.qo_heads * batch; // one tile a CTA at most
    std::vector<long long> trace(size_t(max_ctas) * tiles_per_cta * kMaxPrefillConsumers * kPrefillTraceSlots, 0);
    DeviceBuffer d_trace(trace.size() * sizeof(long long));
    PrefillParams tp = p;
    tp.maybe_phase_trace = d_trace.as<long long>();
    tp.phase_trace_tiles = tiles_per_cta;
    const double traced_ms = timeMedianMs([&](int) { BENCH_CHECK_STATUS(launchPrefill(traced, tp, 0)); });
    BENCH_CHECK_CUDA(cudaMemset(d_trace.ptr, 0, trace.size() * sizeof(long long)));
    BENCH_CHECK_STATUS(launchPrefill(traced, tp, 0));
    BENCH_CHECK_CUDA(cudaDeviceSynchronize());
    BENCH_CHECK_CUDA(cudaMemcpy(trace.data(), d_trace.ptr, trace.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    std::printf("  phases %s: traced kernel %.4f ms (%.1f TFLOP/s)\n", t.name.c_str(), traced_ms,
                flops / (traced_ms * 1e9));
    printPhaseTrace(t.name, trace, max_ctas, tiles_per_cta);
  }
}

bool g_prefill_compare = false;

/// The default prefill kernel, then (with --prefill-compare) the other one,
/// causal masks one tile or one pair per CTA (the default walks pairs persistently), and
/// K/V gathered with cp.async (the default loads contiguous K/V with TMA).
template <typename T> void runPrefillKernels(const PrefillCase &c, ElementType dtype, std::mt19937 &rng) {
  // Full masks over sequences of one length get the stream-K tail's buffers
  // (PrefillParams::maybe_tail_workspace), as a caller that knows its
  // lengths would pass them; the row without them is kept for comparison.
  const bool uniform = c.kv_lens.empty() && std::adjacent_find(c.q_lens.begin(), c.q_lens.end(),
                                                               std::not_equal_to<int>()) == c.q_lens.end();
  const bool stream_k_tail = !c.causal && c.window_left < 0 && uniform;
  runPrefill<T>(c, dtype, rng, PrefillKernel::kAuto, "", /*kv_tma=*/true, stream_k_tail);
  if (stream_k_tail)
    runPrefill<T>(c, dtype, rng, PrefillKernel::kAuto, " [no tail]");
  // Causal masks without a window at d64 / d128: the producer's L2 prefetch
  // of each tile's Q (PrefillParams::q_l2_prefetch) against none.
  if (c.causal && c.window_left < 0 && c.head_dim <= 128)
    runPrefill<T>(c, dtype, rng, PrefillKernel::kAuto, " [no q prefetch]", true, false, /*q_l2_prefetch=*/false);
  if (!g_prefill_compare)
    return;
  const bool ws_default = defaultPrefillKernel() == PrefillKernel::kWarpSpecialized;
  runPrefill<T>(c, dtype, rng, ws_default ? PrefillKernel::kSingleWarpgroup : PrefillKernel::kWarpSpecialized,
                ws_default ? " [single-wg]" : " [warp-spec]");
  if (c.causal && c.window_left < 0) {
    runPrefill<T>(c, dtype, rng, PrefillKernel::kWarpSpecializedOneTileCausal, " [one-tile]");
    runPrefill<T>(c, dtype, rng, PrefillKernel::kWarpSpecializedPairPerCta, " [pair-per-cta]");
  }
  runPrefill<T>(c, dtype, rng, PrefillKernel::kAuto, " [cp.async]", /*kv_tma=*/false);
}

template <typename T> void runDecodeTyped(const DecodeCase &c, ElementType t, std::mt19937 &rng) { runDecode<T>(c, t, rng); }

void writeJson(const char *path) {
  FILE *f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::fprintf(f, "{\n \"gpu\": \"%s\",\n \"sms\": %d,\n \"copy_GBps_rw\": %.1f,\n \"checks\": [\n", prop.name,
               prop.multiProcessorCount, g_copy_gbps);
  for (size_t i = 0; i < g_checks.size(); ++i) {
    const auto &c = g_checks[i];
    const std::string differing = c.differing >= 0 ? ", \"differing\": " + std::to_string(c.differing) : "";
    std::fprintf(f, "  {\"name\": \"%s\", \"rel_err\": %.3e, \"max_abs\": %.3e, \"unwritten\": %lld, \"rows\": %lld%s, \"pass\": %s}%s\n",
                 c.name.c_str(), c.rel_err, c.max_abs, c.unwritten, c.checked_rows, differing.c_str(),
                 c.pass ? "true" : "false", i + 1 < g_checks.size() ? "," : "");
  }
  std::fprintf(f, " ],\n \"timings\": [\n");
  for (size_t i = 0; i < g_timings.size(); ++i) {
    const auto &t = g_timings[i];
    std::fprintf(f, "  {\"kind\": \"%s\", \"name\": \"%s\", \"shape\": %s, \"ms\": %.5f, \"tflops\": %.1f, \"GBps\": %.1f, "
                 "\"pct_of_copy\": %.1f, \"splits\": %d, \"check\": \"%s\", \"diagnostic\": %s}%s\n",
                 t.kind.c_str(), t.name.c_str(), t.shape_json.c_str(), t.ms, t.tflops, t.gbps, t.pct_copy, t.splits,
                 t.check.c_str(), t.diagnostic ? "true" : "false", i + 1 < g_timings.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  std::fclose(f);
}

// The element types the cases below run in.
constexpr ElementType bf16 = ElementType::kBf16, fp16 = ElementType::kFp16;

/// Timed as the decode step launches attention: replayed from a graph,
/// with PDL and the older keys read before the wait.
DecodeCase asInTheStep(DecodeCase c) {
  c.timed = true;
  c.cuda_graph = true;
  c.pdl = true;
  c.early_kv = true;
  return c;
}

/// Every decode kernel path against the fp64 reference: the GQA, MHA, MQA,
/// window and soft-cap cases, with early K/V, cluster merges, one K/V stage
/// and the wide CTA.
void checkDecodeKernels(std::mt19937 &rng) {
  // Named, as the loops below pick cases by name.
  const DecodeCase gqa = {"gqa32/8 d128 odd lens p16", 0, 32, 8, 128, 16, {1, 17, 1000, 4097, 333}};
  DecodeCase gqa_combine_kernel = gqa; // 7 splits merged by the combine kernel
  gqa_combine_kernel.forced_splits = 7;
  gqa_combine_kernel.fused_combine = false;
  DecodeCase gqa_one_split = gqa;
  gqa_one_split.forced_splits = 1;
  const DecodeCase mha_d64 = {"mha16/16 d64 p1", 0, 16, 16, 64, 1, {5, 300, 2049}};
  // 3 splits: the CUDA-core kernel's merging CTA stages them in its merge buffer.
  DecodeCase mha_d64_3_splits = mha_d64;
  mha_d64_3_splits.forced_splits = 3;
  const DecodeCase gqa64_p64 = {"gqa64/8 d128 p64", 0, 64, 8, 128, 64, {70, 1500, 9000}};
  const DecodeCase gqa_d256 = {"gqa16/8 d256 p16", 0, 16, 8, 256, 16, {3, 511, 2500}};
  const DecodeCase mqa = {"mqa8/1 d128 p32", 0, 8, 1, 128, 32, {100, 6000}, 0, -1, 0.f, 5};
  const DecodeCase window = {
      "gqa32/8 d128 window 1000 p16", 0, 32, 8, 128, 16, {50, 1001, 5000}, 0, 1000};
  const DecodeCase softcap = {
      "gqa32/8 d128 softcap 30 p16", 0, 32, 8, 128, 16, {50, 3000}, 0, -1, 30.f};
  const std::vector<DecodeCase> decode_checks = {
      gqa,     gqa_combine_kernel, gqa_one_split, mha_d64, gqa64_p64, gqa_d256, mqa, window,
      softcap, mha_d64_3_splits};
  for (const auto &c : decode_checks)
    runDecode<__nv_bfloat16>(c, bf16, rng);
  // The same with the older keys read before the (here no-op) wait: the
  // newest key must still be the one loaded after it.
  for (DecodeCase c : decode_checks) {
    c.name += " early-kv";
    c.early_kv = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The splits merged through distributed shared memory, at 2 to 8 splits
  // (a cluster each), including the early path.
  for (int splits : {2, 5, 8})
    for (DecodeCase c : {gqa, gqa_combine_kernel, mha_d64, gqa64_p64, gqa_d256, mqa}) {
      c.name += " cluster";
      c.cluster_combine = true;
      c.forced_splits = splits;
      c.early_kv = splits == 5;
      runDecode<__nv_bfloat16>(c, bf16, rng);
    }
  runDecode<__half>(gqa, fp16, rng);
  runDecode<__half>(gqa_d256, fp16, rng);
  // A kernel set-up on every GQA case, plain, then with early K/V and the
  // splits merged in a cluster.
  auto checkGqaCases = [&](const std::string &suffix, auto setUp) {
    for (DecodeCase c : {gqa, gqa_combine_kernel, gqa64_p64, gqa_d256, window, softcap}) {
      c.name += suffix;
      setUp(c);
      runDecode<__nv_bfloat16>(c, bf16, rng);
      c.name += " early-kv cluster";
      c.early_kv = true;
      c.cluster_combine = true;
      c.forced_splits = 5;
      runDecode<__nv_bfloat16>(c, bf16, rng);
    }
  };
  // One K/V stage (tiles one after another through it, ~45 KB at d128):
  // chunks of several tiles included.
  checkGqaCases(" single-stage", [](DecodeCase &c) { c.single_kv_stage = true; });
  // The wide CTA (16 warps, a 256-key tile, one split) where it is built
  // (head_dim <= 128, no window or soft-cap): short contexts as in the
  // decode step, and long ones, whose tiles run one after another.
  const DecodeCase gqa16_short = {"gqa16/8 d128 short p16", 0, 16, 8, 128, 16, {1, 64, 150, 256}};
  const DecodeCase gqa8_d64_short = {"gqa8/2 d64 short p16", 0, 8, 2, 64, 16, {7, 200}};
  for (DecodeCase c : {gqa, gqa64_p64, mqa, gqa16_short, gqa8_d64_short}) {
    c.name += " wide";
    c.wide_cta = true;
    c.forced_splits = 1;
    runDecode<__nv_bfloat16>(c, bf16, rng);
    c.name += " early-kv";
    c.early_kv = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  DecodeCase wide_fp16 = gqa16_short;
  wide_fp16.name += " wide";
  wide_fp16.wide_cta = true;
  wide_fp16.forced_splits = 1;
  runDecode<__half>(wide_fp16, fp16, rng);
  // Wide CTAs as splits (a 256-key tile each, or several in a row), merged
  // through global memory by the staged combine.
  for (DecodeCase c : {gqa, gqa64_p64, mqa}) {
    c.name += " wide";
    c.wide_cta = true;
    c.forced_splits = 5;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
}

/// Every prefill kernel path against the fp64 reference: varlen, paged
/// prefixes, windows, soft-cap, the stream-K tail, both element types.
void checkPrefillKernels(std::mt19937 &rng) {
  std::vector<PrefillCase> prefill_checks = {
      {"varlen causal gqa32/8 d128", 32, 8, 128, {1, 77, 300, 1025}, {}, true},
      {"varlen full gqa32/8 d128", 32, 8, 128, {1, 77, 300, 1025}, {}, false},
      {"causal mqa8/1 d64 odd", 8, 1, 64, {513, 65, 129}, {}, true},
      {"full mha4/4 d256 odd", 4, 4, 256, {200, 33}, {}, false},
      {"causal gqa8/2 d256", 8, 2, 256, {700}, {}, true},
      {"paged prefix causal gqa32/8 d128 p16", 32, 8, 128, {100, 1, 257}, {1100, 40, 300}, true, 16},
      {"paged prefix causal d64 p1", 8, 2, 64, {31, 130}, {63, 700}, true, 1},
      {"paged full d256 p64", 8, 8, 256, {90, 300}, {500, 300}, false, 64},
      {"paged full gqa16/4 d128 p16", 16, 4, 128, {90, 400}, {500, 400}, false, 16},
      {"window 256 causal gqa16/4 d128", 16, 4, 128, {1000, 37}, {}, true, 0, 256},
      {"window 100 paged prefix d128 p16", 16, 4, 128, {300}, {900}, true, 16, 100},
      {"softcap 50 causal d128", 16, 4, 128, {400, 9}, {}, true, 0, -1, 50.f},
      // The stream-K tail on 132 SMs (PrefillParams::tail_tiles): 200 tiles
      // of 8 key blocks with a partial last one, 68 in the last round; d64's
      // three consumers (192 tiles, 60 left); 198 tiles of 2 blocks, each of
      // the 66 left split in two; 198 of one block (fewer steps than CTAs:
      // whole tiles).
      {"stream-k full mha5/5 d128 odd", 5, 5, 128, {1000, 1000, 1000, 1000, 1000}, {}, false},
      {"stream-k full gqa12/4 d64 odd", 12, 4, 64, {700, 700, 700, 700}, {}, false},
      {"stream-k full gqa33/11 d128 L256", 33, 11, 128, {256, 256, 256}, {}, false},
      {"stream-k full gqa33/3 d128 L128", 33, 3, 128, {128, 128, 128, 128, 128, 128}, {}, false},
      // A sequence without keys amid the persistent walk's tiles (288 on
      // 132 CTAs): its rows write zeros, and the tiles around it keep the
      // producer's Q and next-tile hand-off in step.
      {"full gqa32/8 d128 empty keys", 32, 8, 128, {300, 200, 129}, {300, 0, 129}, false},
  };
  for (const auto &c : prefill_checks)
    runPrefillKernels<__nv_bfloat16>(c, bf16, rng);
  runPrefillKernels<__half>(prefill_checks[0], fp16, rng);
  runPrefillKernels<__half>(prefill_checks[1], fp16, rng);
  runPrefillKernels<__half>(prefill_checks[4], fp16, rng);
  runPrefillKernels<__half>(prefill_checks[12], fp16, rng);
}

/// The issue's decode rows (GQA 32/8, d128, bf16, page 16).
void timeDecodeTargets(std::mt19937 &rng) {
  const std::vector<std::pair<int, int>> decode_shapes = {{64, 4096}, {64, 16384}, {256, 2048}, {1, 32768}, {1, 4096}};
  for (auto [batch, ctx] : decode_shapes) {
    DecodeCase c{"b" + std::to_string(batch) + " L" + std::to_string(ctx), batch, 32, 8, 128, 16, {}, ctx};
    c.timed = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
}

/// Diagnostic decode rows: the launch set-ups and split counts the runtime
/// chooses between (graph, PDL, early K/V, clusters, one stage, wide CTAs,
/// the split sweep), each against the others on the same shapes.
void timeDecodeLaunchChoices(std::mt19937 &rng) {
  // Batch 1 at 4k at other split counts than the runtime's, launched on a
  // stream.
  for (int splits : {8, 16, 64, 128}) {
    DecodeCase c{"diag b1 L4096 splits=" + std::to_string(splits), 1, 32, 8, 128, 16, {}, 4096};
    c.timed = true;
    c.forced_splits = splits;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  for (int ctx : {4096, 32768})
    for (int mode = 0; mode < 3; ++mode) {
      // With PDL each launch's CTAs start while the previous one drains:
      // how the decode step runs attention (CudaExecutorOptions::attention_pdl),
      // and with the older keys read before the wait (attention_early_kv).
      const char *suffix[] = {" cuda-graph", " cuda-graph+pdl", " cuda-graph+pdl+early-kv"};
      DecodeCase c{"diag b1 L" + std::to_string(ctx) + suffix[mode], 1, 32, 8, 128, 16, {}, ctx};
      c.timed = true;
      c.cuda_graph = true;
      c.pdl = mode >= 1;
      c.early_kv = mode == 2;
      runDecode<__nv_bfloat16>(c, bf16, rng);
    }
  // The contexts of the model benchmarks' decode steps (128-token prompt,
  // up to 128 new tokens), launched as the step launches them, at each
  // split count: Llama-3-8B's GQA 32/8 and Qwen3-0.6B's 16/8.
  for (int heads : {32, 16})
    for (int splits : {1, 2, 4, 8, 16})
      for (bool cluster : {false, true}) {
        if (cluster && splits == 1)
          continue;
        DecodeCase c = asInTheStep({"diag b1 L256 h" + std::to_string(heads) + "/8 graph+pdl+early-kv splits=" +
                                        std::to_string(splits) + (cluster ? " cluster" : ""),
                                    1, heads, 8, 128, 16, {}, 256});
        c.cluster_combine = cluster;
        c.cluster_max_splits = kMaxClusterSplits;
        c.forced_splits = splits;
        runDecode<__nv_bfloat16>(c, bf16, rng);
      }
  // Batch 32 at the model checks' contexts (Llama-3-8B's GQA 32/8): the
  // split heuristic gives one split here (256 CTAs fill a wave), so each
  // CTA walks the whole context alone; 2 and 4 splits against it.
  for (int splits : {1, 2, 4}) {
    DecodeCase c = asInTheStep(
        {"diag b32 L256 h32/8 graph+pdl+early-kv splits=" + std::to_string(splits), 32, 32, 8, 128, 16, {}, 256});
    c.forced_splits = splits;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // Batch 1 at 4k with 8 splits merged in a cluster, and 16 in a
  // non-portable cluster of 16, against the 32-split fused merge above.
  for (int splits : {8, 16}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L4096 graph+pdl+early-kv splits=" + std::to_string(splits) + " cluster", 1, 32, 8, 128, 16, {}, 4096});
    c.cluster_combine = true;
    c.cluster_max_splits = splits;
    c.forced_splits = splits;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The split heuristic at medium batches (below a wave without splits),
  // where the grid's wave count depends on the split: each shape at the
  // heuristic's choice and at the counts that end one or two waves exactly
  // or spill a few CTAs past them; past a wave unsplit (the last three
  // shapes: 1.03, 1.21 and 1.45 waves), at 1-4 splits. Then the
  // heuristic's time over the best measured.
  {
    int device = 0, sms = 0, per_sm = 0;
    BENCH_CHECK_CUDA(cudaGetDevice(&device));
    BENCH_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    AttentionConfig gqa{ElementType::kBf16, 128, false};
    BENCH_CHECK_STATUS(decodeCtasPerSm(gqa, 4, &per_sm));
    const int slots = sms * per_sm;
    const std::vector<std::pair<int, int>> sweep_shapes = {
        {1, 32768}, {1, 16384}, {1, 4096},  {1, 2048},  {2, 2048},  {4, 1024},
        {2, 8192},  {3, 8192},  {4, 8192},  {5, 8192},  {6, 8192},  {8, 4096},
        {12, 4096}, {16, 2048}, {24, 2048}, {34, 4096}, {40, 4096}, {48, 4096}};
    for (auto [batch, context] : sweep_shapes) {
      const int base = batch * 8;
      int chosen = 0;
      BENCH_CHECK_STATUS(planDecodeSplits(gqa, batch, 32, 8, context, &chosen));
      std::vector<int> counts = {chosen};
      const std::vector<int> candidates =
          base > slots ? std::vector<int>{1, 2, 3, 4}
                       : std::vector<int>{slots / base - 1, slots / base, slots / base + 1,
                                          2 * slots / base, 2 * slots / base + 1};
      for (int s : candidates)
        if (s >= 1 && s <= context / 128 &&
            std::find(counts.begin(), counts.end(), s) == counts.end())
          counts.push_back(s);
      double chosen_ms = 0, best_ms = 0;
      int best = 0;
      for (int s : counts) {
        const std::string name = "diag split sweep b" + std::to_string(batch) + " L" +
                                 std::to_string(context) + " splits=" + std::to_string(s) +
                                 (s == chosen ? " (heuristic)" : "");
        DecodeCase c = asInTheStep({name, batch, 32, 8, 128, 16, {}, context});
        c.forced_splits = s;
        const double ms = runDecode<__nv_bfloat16>(c, bf16, rng);
        if (s == chosen)
          chosen_ms = ms;
        if (best == 0 || ms < best_ms)
          best = s, best_ms = ms;
      }
      std::printf("  sweep b%d L%d on %d slots: heuristic %d splits %.4f ms, best %d splits %.4f "
                  "ms (%.2fx)\n",
                  batch, context, slots, chosen, chosen_ms, best, best_ms, chosen_ms / best_ms);
    }
  }
  // Qwen3-0.6B's group of 2 at batch 4 (the split heuristic's 8 splits,
  // and 9 as before 2026-12-06), merged in 8-CTA clusters as its decode
  // step asks (the launcher merges through global memory where the
  // clusters do not fit one wave) and by the fused merge.
  for (const auto &[splits, cluster] :
       std::vector<std::pair<int, bool>>{{8, true}, {8, false}, {9, false}}) {
    const std::string name =
        "diag b4 L4096 h16/8 graph+pdl+early-kv splits=" + std::to_string(splits) +
        (cluster ? " cluster asked" : "");
    DecodeCase c = asInTheStep({name, 4, 16, 8, 128, 16, {}, 4096});
    c.cluster_combine = cluster;
    c.forced_splits = splits;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // Batch 1 with fewer splits than fit a wave: more slots free for the
  // next launch's CTAs to start their early K/V beside this launch's,
  // against more keys a CTA (a third 64-key tile from 22 splits at L4096,
  // 11 at L2048), beside the counts the heuristic takes at L2048 and L8192
  // (16, 32). Back to back they read faster (device run 289, H100: L4096
  // at 22 splits 8.45 us against 32's 9.2), but not in the decode step,
  // where the launch before is the QKV GEMV (runs 291-292: 1.0-1.3 us a
  // layer slower), so the heuristic keeps 32. At L16384 / L32768 fewer
  // splits lost here too (run 290: 24-30 splits 26.3 / 48.7-49.7 us
  // against 32's 25.3 / 47.2).
  for (const auto &[context, counts] : std::vector<std::pair<int, std::vector<int>>>{
           {4096, {20, 22, 24, 26, 28}}, {2048, {8, 11, 12, 16}}, {8192, {22, 24, 28, 32}}}) {
    for (int splits : counts) {
      const std::string name = "diag b1 L" + std::to_string(context) +
                               " graph+pdl+early-kv splits=" + std::to_string(splits);
      DecodeCase c = asInTheStep({name, 1, 32, 8, 128, 16, {}, context});
      c.forced_splits = splits;
      runDecode<__nv_bfloat16>(c, bf16, rng);
    }
  }
  // Batch 1 at 16 splits, 128 CTAs at one an SM: the next launch's CTAs
  // fit beside this one's and start their K/V under its tail (the read
  // floor below reads at copy speed with room for the next launch, and
  // 8-15 points below it without).
  for (int context : {32768, 4096}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L" + std::to_string(context) + " graph+pdl+early-kv splits=16", 1, 32, 8, 128, 16, {}, context});
    c.forced_splits = 16;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // One K/V stage at the carveout of one CTA, as the step launches it at
  // short contexts (Llama-3-8B's 16 splits, Qwen3-0.6B's 4 of 64 tokens),
  // and at 4k, where each chunk is two tiles run one after the other.
  for (const auto &[name, heads, splits, context] :
       std::vector<std::tuple<std::string, int, int, int>>{{"diag b1 L256 h32/8 graph+pdl+early-kv splits=16", 32, 16, 256},
                                                           {"diag b1 L256 h16/8 graph+pdl+early-kv splits=4", 16, 4, 256},
                                                           {"diag b1 L4096 graph+pdl+early-kv splits=32", 32, 32, 4096}}) {
    DecodeCase c = asInTheStep({name + " single-stage", 1, heads, 8, 128, 16, {}, context});
    c.forced_splits = splits;
    c.single_kv_stage = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // One K/V stage (~41 KB) at the whole carveout: five CTAs fit an SM, so
  // at the pipelined kernel's splits (two an SM) the next launch's CTAs
  // start their K/V beside this one's, as the read floor's four-an-SM
  // rows do; at twice the splits, four an SM of this launch's own. Slower
  // than the pipeline on an H100 (runs 167-169): each tile then waits a
  // DRAM round trip, which costs more than the room gains.
  for (auto [context, splits] : {std::pair{32768, 33}, std::pair{32768, 66}, std::pair{4096, 32}, std::pair{4096, 64}}) {
    DecodeCase c = asInTheStep({"diag b1 L" + std::to_string(context) + " graph+pdl+early-kv splits=" +
                                    std::to_string(splits) + " single-stage carveout 100",
                                1, 32, 8, 128, 16, {}, context});
    c.forced_splits = splits;
    c.single_kv_stage = true;
    c.carveout_percent = 100;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // Batch 1 at 4k as wide CTAs: 16 splits of one 256-key tile, all of a
  // CTA's keys in flight at once and 16 partials to merge (against the 32
  // pipelined splits of two 64-key tiles above), and 8 of two tiles.
  for (int splits : {16, 8}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L4096 graph+pdl+early-kv wide splits=" + std::to_string(splits), 1, 32, 8, 128, 16, {}, 4096});
    c.forced_splits = splits;
    c.wide_cta = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The wide CTA at the step's short contexts: one 256-key tile a KV head,
  // nothing to merge (against the split rows above).
  for (int heads : {32, 16}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L256 h" + std::to_string(heads) + "/8 graph+pdl+early-kv wide", 1, heads, 8, 128, 16, {}, 256});
    c.forced_splits = 1;
    c.wide_cta = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
}

/// What bounds batch 1: the merge as a second launch, the KV cache left in
/// L2, almost no keys (fixed cost), read-only floors, the chain alone, the
/// attention without its merge, traced launches and the back-to-back
/// interval of an empty kernel (launch floor); and the fused merge checked
/// across split counts and GQA groups.
void timeDecodeLatencyDiagnostics(std::mt19937 &rng) {
  for (int variant = 0; variant < 4; ++variant) {
    DecodeCase c{"", 1, 32, 8, 128, 16, {}, 4096};
    c.timed = true;
    if (variant == 0) {
      c.name = "diag b1 L4096 combine-kernel";
      c.fused_combine = false;
    } else if (variant == 1) {
      c.name = "diag b1 L4096 L2-resident";
      c.l2_resident = true;
    } else if (variant == 2) {
      c.name = "diag b1 L64 fixed cost";
      c.context = 64;
    } else {
      c.name = "diag b1 L32768 combine-kernel";
      c.context = 32768;
      c.fused_combine = false;
    }
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // What a launch that only reads batch 1's K/V takes, in the decode
  // kernel's splits and at its residency (two CTAs an SM), at three and
  // at four an SM: the floor under the b1 rows' % of copy. (At three, 73
  // KB, the floor reads 97% of copy on an H200, but the kernel with two
  // K/V stages to fit it read 65%: device run 226.)
  for (auto [context, splits] : {std::pair{32768, 33}, std::pair{4096, 32}})
    for (int smem_kb : {105, 73, 50})
      for (bool pdl : {false, true})
        runReadFloor(context, splits, smem_kb * 1024, pdl, rng);
  for (int context : {32768, 4096}) // 16 splits: 128 CTAs, one an SM
    runReadFloor(context, 16, 105 * 1024, true, rng);
  // The chain alone, at b1 L4096's grid (32 splits, 8 KV heads, 128
  // threads): the wait's release and exit, then with one L2 round trip
  // and a store.
  for (bool round_trip : {false, true})
    for (int smem_kb : {105, 73}) {
      constexpr int kCtas = 32 * 8, kThreads = 128;
      DeviceBuffer in(sizeof(uint4) * kCtas * kThreads), out(sizeof(uint4) * kCtas * kThreads);
      BENCH_CHECK_CUDA(cudaMemset(in.ptr, 0, sizeof(uint4) * kCtas * kThreads));
      BENCH_CHECK_CUDA(
          cudaFuncSetAttribute(dependentChainKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_kb * 1024));
      const double ms = timeGraphReplayMs([&](cudaStream_t stream, int) {
        BENCH_CHECK_CUDA(launchKernel(dependentChainKernel, dim3(kCtas), dim3(kThreads), smem_kb * 1024, stream,
                                      true, in.as<const uint4>(), out.as<uint4>(), round_trip));
      });
      recordLaunchTiming(std::string("diag b1 L4096 grid, wait") +
                             (round_trip ? " + L2 round trip + store" : " only") + ", " +
                             std::to_string(smem_kb) + " KB a CTA, graph+pdl",
                         ms, "{\"ctas\": 256, \"threads\": 128}");
    }
  // The attention at b1 L4096 (32 splits) without its merge: the partials
  // written, the combine kernel not launched; and with the merge as a
  // launch of its own (combineSplitsKernel, with PDL) at both lengths.
  {
    DecodeCase c = asInTheStep({"diag b1 L4096 graph+pdl+early-kv partials only", 1, 32, 8, 128, 16, {}, 4096});
    c.fused_combine = false;
    c.skip_combine = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  {
    DecodeCase c = asInTheStep({"diag b1 L4096 graph+pdl+early-kv count only", 1, 32, 8, 128, 16, {}, 4096});
    c.count_only = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The fused merge checked across split counts (2 to its 128) and GQA
  // groups (2, 4, 8 query heads a KV head), batch 3: the stage holds 33
  // splits at groups 2 and 4 (32: b1 L4096's count); group 8's 33 and
  // every 128 merge from global memory.
  for (int qo_heads : {16, 32, 64})
    for (int splits : {2, 32, 33, 128}) {
      DecodeCase c{"fused merge h" + std::to_string(qo_heads) +
                       "/8 splits=" + std::to_string(splits),
                   3,
                   qo_heads,
                   8,
                   128,
                   16,
                   {4096, 1000, 2049}};
      c.forced_splits = splits;
      runDecode<__nv_bfloat16>(c, bf16, rng);
    }
  // The merge as a launch of its own at each head dim (d64's 16 quads of
  // output a head run on a warp: the weights' shuffles take one).
  for (int head_dim : {64, 128, 256}) {
    DecodeCase c{"combine-kernel d" + std::to_string(head_dim) + " h32/8 splits=33",
                 3,
                 32,
                 8,
                 head_dim,
                 16,
                 {4096, 1000, 2049}};
    c.forced_splits = 33;
    c.fused_combine = false;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The issue's two b1 rows again, each followed by a traced replay.
  for (int context : {4096, 32768}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L" + std::to_string(context) + " graph+pdl+early-kv traced", 1, 32, 8, 128, 16, {}, context});
    c.trace = true;
    runDecode<__nv_bfloat16>(c, bf16, rng);
    // Is the merger slowed by the next launch's CTAs beside it (their
    // early K/V streaming in while it merges)? The same launch with the
    // next one let in only after this one's tiles, and with no PDL at all.
    c.name = "diag b1 L" + std::to_string(context) +
             " graph+pdl+early-kv traced, dependents after tiles";
    c.dependents = DecodeParams::Dependents::kAfterTiles;
    runDecode<__nv_bfloat16>(c, bf16, rng);
    c.name = "diag b1 L" + std::to_string(context) + " graph traced, no pdl";
    c.dependents = DecodeParams::Dependents::kAtStart;
    c.pdl = false;
    c.early_kv = false;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  for (int context : {4096, 32768}) {
    DecodeCase c = asInTheStep(
        {"diag b1 L" + std::to_string(context) + " graph+pdl+early-kv combine-kernel", 1, 32, 8, 128, 16, {}, context});
    c.fused_combine = false;
    runDecode<__nv_bfloat16>(c, bf16, rng);
  }
  // The floor under the attention's dependency: a CTA reads only its
  // first 64 KB before the launch before it has ended (as the attention's
  // early K/V), the rest after. The floors above let the next launch's
  // CTAs read all of their pages under this launch's tail, which the
  // attention cannot.
  for (auto [context, splits] : {std::pair{32768, 33}, std::pair{4096, 32}})
    for (int smem_kb : {105, 73, 50})
      runReadFloor(context, splits, smem_kb * 1024, true, rng, true);
  {
    const double ms = timeMedianMs([](int) { emptyKernel<<<1, 32>>>(); BENCH_CHECK_CUDA(cudaGetLastError()); });
    recordLaunchTiming("diag empty kernel back-to-back", ms, "{}");
  }
}

/// The issue's prefill rows (bf16, 16k tokens per batch, H*d = 2048) and
/// diagnostics of the 1k rows.
void timePrefill(std::mt19937 &rng) {
  struct Shape { int d, seqlen; };
  const std::vector<Shape> shapes = {{128, 1024}, {128, 4096}, {128, 16384}, {64, 4096}, {256, 4096}};
  for (auto s : shapes)
    for (bool causal : {true, false}) {
      const int heads = 2048 / s.d, batch = 16384 / s.seqlen;
      PrefillCase c{std::string(causal ? "causal" : "full") + " d" + std::to_string(s.d) + " L" +
                        std::to_string(s.seqlen),
                    heads, heads, s.d, std::vector<int>(batch, s.seqlen), {}, causal};
      c.timed = true;
      runPrefillKernels<__nv_bfloat16>(c, bf16, rng);
    }
  PrefillCase paged{"causal d128 L4096 paged p16", 16, 16, 128, std::vector<int>(4, 4096), {}, true, 16};
  paged.timed = true;
  runPrefillKernels<__nv_bfloat16>(paged, bf16, rng);
  // The decode step's prefill of a 2048-token prompt (Qwen3-0.6B's heads,
  // GQA 16/8, the cache's 16-token pages): 128 causal pairs, one a CTA,
  // each running the kernel's code once, cold. The batched shapes above
  // run several tiles a CTA and warm it up; this one showed the tile
  // overlap's code growing the attention 41.0 -> 47.7 us a launch (device
  // runs 143-144).
  PrefillCase prompt{"diag causal d128 L2048 b1 h16/8 paged p16 (a prompt's prefill)", 16, 8, 128, {2048}, {},
                     true, 16};
  prompt.timed = true;
  runPrefill<__nv_bfloat16>(prompt, bf16, rng);
  // What the persistent walk's last round costs at 1k: 16 sequences make
  // 2048 tiles (1024 causal pairs), 15.5 (7.8) rounds on 132 SMs; 33 make
  // 4224 tiles (2112 pairs), whole rounds. The default kernel only.
  for (bool causal : {true, false}) {
    PrefillCase whole{std::string("diag ") + (causal ? "causal" : "full") + " d128 L1024 b33 (whole rounds)", 16,
                      16, 128, std::vector<int>(33, 1024), {}, causal};
    whole.timed = true;
    runPrefill<__nv_bfloat16>(whole, bf16, rng);
  }
  // What a launch costs besides its rounds at 1k: 33 heads of 8 query
  // blocks make 264 tiles a sequence, two whole rounds on 132 SMs, so the
  // time against the rounds (2, 4, 8) is a line whose intercept is the
  // launch's fixed cost (launch gap, setup, first tiles' fill, drain).
  {
    std::vector<double> rounds, ms;
    for (int seqs : {1, 2, 4}) {
      PrefillCase line{"diag full d128 L1024 h33 b" + std::to_string(seqs) + " (" +
                           std::to_string(2 * seqs) + " rounds)",
                       33,
                       33,
                       128,
                       std::vector<int>(seqs, 1024),
                       {},
                       false};
      line.timed = true;
      runPrefill<__nv_bfloat16>(line, bf16, rng);
      rounds.push_back(2.0 * seqs);
      ms.push_back(g_timings.back().ms);
    }
    const double n = rounds.size(), sx = rounds[0] + rounds[1] + rounds[2],
                 sy = ms[0] + ms[1] + ms[2];
    const double sxx = rounds[0] * rounds[0] + rounds[1] * rounds[1] + rounds[2] * rounds[2];
    const double sxy = rounds[0] * ms[0] + rounds[1] * ms[1] + rounds[2] * ms[2];
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx),
                 intercept = (sy - slope * sx) / n;
    std::printf("  rounds full d128 L1024: %.2f us a round, %.2f us a launch besides its rounds\n",
                slope * 1e3, intercept * 1e3);
  }
  // Where a tile's time goes at 1k (the rows that miss cuDNN) against
  // 16k: the default kernel with its consumers' phases stamped.
  for (int len : {1024, 16384})
    for (bool causal : {false, true}) {
      PrefillCase traced{std::string("diag phases ") + (causal ? "causal" : "full") + " d128 L" + std::to_string(len),
                         16, 16, 128, std::vector<int>(16384 / len, len), {}, causal};
      traced.timed = true;
      traced.phase_trace = true;
      runPrefill<__nv_bfloat16>(traced, bf16, rng);
      if (!causal) // where the stream-K tail's time goes
        runPrefill<__nv_bfloat16>(traced, bf16, rng, PrefillKernel::kAuto, " [stream-k tail]", true, true);
    }
}

} // namespace

int main(int argc, char **argv) {
  // Line by line into a log: a kernel that hangs (the A/B scripts kill it on
  // a timeout) leaves the checks before it, not an empty file.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char *json_path = nullptr;
  bool timing = true, prefill = true, decode = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--skip-timing"))
      timing = false;
    else if (!std::strcmp(argv[i], "--decode-only"))
      prefill = false;
    else if (!std::strcmp(argv[i], "--prefill-only"))
      decode = false;
    else if (!std::strcmp(argv[i], "--prefill-compare"))
      g_prefill_compare = true;
  }
  std::mt19937 rng(20261130);
  if (timing && decode)
    measureCopyBandwidth();

  std::printf("== decode correctness\n");
  if (decode)
    checkDecodeKernels(rng);
  std::printf("== prefill correctness\n");
  if (prefill)
    checkPrefillKernels(rng);
  if (timing && decode) {
    std::printf("== decode timing (GQA 32/8, d128, bf16, page 16)\n");
    timeDecodeTargets(rng);
    timeDecodeLaunchChoices(rng);
    timeDecodeLatencyDiagnostics(rng);
  }
  if (timing && prefill) {
    std::printf("== prefill timing (bf16, 16k tokens per batch, H*d = 2048)\n");
    timePrefill(rng);
  }

  int failed = 0;
  for (auto &c : g_checks)
    failed += c.pass ? 0 : 1;
  std::printf("\n%zu checks, %d failed\n", g_checks.size(), failed);
  if (json_path)
    writeJson(json_path);
  return failed == 0 ? 0 : 1;
}
