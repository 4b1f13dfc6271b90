//===- decode.cu - The paged decode cases: checks, targets, diagnostics ---===//

#include "bench.h"

#include "attention/device_utils.cuh"
#include "attention/pdl_launch.h"

namespace txc::bench {
namespace {

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

/// Timed as the decode step launches attention: replayed from a graph,
/// with PDL and the older keys read before the wait.
DecodeCase asInTheStep(DecodeCase c) {
  c.timed = true;
  c.cuda_graph = true;
  c.pdl = true;
  c.early_kv = true;
  return c;
}


} // namespace

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

} // namespace txc::bench
