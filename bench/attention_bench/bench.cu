//===- bench.cu - The attention bench's results, timing and test data ----===//

#include "bench.h"

namespace txc::bench {

unsigned long long g_seed = 0x5eed0001ull;
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

namespace {
int log2Exact(int x) {
  int l = 0;
  while ((1 << l) < x)
    ++l;
  return l;
}

} // namespace

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

template KVCache makeKVCache<__nv_bfloat16>(const std::vector<int> &, int, int, int, std::mt19937 &);
template KVCache makeKVCache<__half>(const std::vector<int> &, int, int, int, std::mt19937 &);
template CheckResult compareWithReference<__nv_bfloat16>(const std::string &, const ReferenceArgs &,
                                                         const std::vector<int> &, const std::vector<int> &,
                                                         const DeviceBuffer &, long long, double);
template CheckResult compareWithReference<__half>(const std::string &, const ReferenceArgs &, const std::vector<int> &,
                                                  const std::vector<int> &, const DeviceBuffer &, long long, double);

} // namespace txc::bench
