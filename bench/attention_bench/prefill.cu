//===- prefill.cu - The prefill cases: checks, targets, phase traces ------===//

#include "bench.h"

namespace txc::bench {

bool g_prefill_compare = false;

namespace {

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
        // Q wait, first step, later steps, last P V, epilogue.
        const long long phases[5] = {
            row[kPhaseQReady] - row[kPhaseTileStart], row[kPhaseFirstStep] - row[kPhaseQReady],
            row[kPhaseMainLoop] - row[kPhaseFirstStep], row[kPhaseLastPV] - row[kPhaseMainLoop],
            row[kPhaseEpilogue] - row[kPhaseLastPV]};
        double *into = tile == 0 ? first_sum : sum;
        for (int ph = 0; ph < 5; ++ph)
          into[ph] += phases[ph];
        if (tile == 0) {
          first += row[kPhaseEpilogue] - row[kPhaseTileStart];
          ++firsts;
          continue;
        }
        const long long *before = row - kMaxPrefillConsumers * kPrefillTraceSlots;
        if (before[kPhaseEpilogue] != 0) {
          gap += row[kPhaseTileStart] - before[kPhaseEpilogue];
          ++gaps;
        }
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
void runPrefill(const PrefillCase &c, ElementType dtype, std::mt19937 &rng,
                PrefillKernel kernel = PrefillKernel::kAuto, const std::string &suffix = "",
                bool kv_tma = true, bool stream_k_tail = false, bool q_l2_prefetch = true,
                bool first_tile_l2_prefetch = false) {
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
  p.first_tile_l2_prefetch = first_tile_l2_prefetch;
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
  // The warp-specialized kernel's first tile asked of the L2 at its start
  // (PrefillParams::first_tile_l2_prefetch, off by default until measured).
  if (c.timed)
    runPrefill<T>(c, dtype, rng, PrefillKernel::kAuto, " [first prefetch]", true, stream_k_tail,
                  true,
                  /*first_tile_l2_prefetch=*/true);
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

} // namespace

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
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0; // least squares of ms against rounds
    for (int seqs : {1, 2, 4}) {
      const double rounds = 2.0 * seqs;
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
      const double ms = g_timings.back().ms;
      n += 1, sx += rounds, sy += ms, sxx += rounds * rounds, sxy += rounds * ms;
      runPrefill<__nv_bfloat16>(line, bf16, rng, PrefillKernel::kAuto, " [first prefetch]", true,
                                false, true,
                                /*first_tile_l2_prefetch=*/true);
    }
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
      // The first tile's first step (its wait for Q and the first K block:
      // 7.8-8.0K cycles against 0.2K in later tiles, run 296) with the
      // first tile asked of the L2 at the start.
      runPrefill<__nv_bfloat16>(traced, bf16, rng, PrefillKernel::kAuto, " [first prefetch]", true,
                                false, true,
                                /*first_tile_l2_prefetch=*/true);
    }
}

} // namespace txc::bench
