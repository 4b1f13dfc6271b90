//===- nvrtc_attention_test.cu - NVRTC-built attention kernels on the GPU -===//
//
// Compiles model-specialized kernels through lib/codegen (compile-time page
// size, as the artifact compiler does), loads the cubins with the driver
// API, launches them with the block size and shared memory read from the
// module, and checks the outputs against the fp64 reference on fresh random
// inputs with NaN-poisoned outputs. Exit code 0 only if every case passes.
//
//===----------------------------------------------------------------------===//
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/params.h"
#include "attention_reference.cuh"
#include "lib/codegen/attention_codegen.h"
#include "lib/codegen/nvrtc_compiler.h"

using namespace txc::codegen;
using txc::kernels::DecodeParams;
using txc::kernels::KVCacheView;
using txc::kernels::PrefillParams;

namespace {

#define EXPECT_CUDA(call)                                                                          \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::printf("FAIL %s: %s at line %d\n", #call, cudaGetErrorString(e_), __LINE__);            \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
#define EXPECT_CU(call)                                                                            \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *n_ = "?";                                                                        \
      cuGetErrorName(r_, &n_);                                                                     \
      std::printf("FAIL %s: %s at line %d\n", #call, n_, __LINE__);                               \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int threads = 0, smem_bytes = 0;
};

std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

/// traits_override: compile the prefill kernel with this Traits template in
/// place of the default PrefillTraits (the kernel that is not the default).
bool loadKernel(const AttentionKernelSpec &spec, LoadedKernel *k, const std::string &traits_override = "") {
  KernelCompiler compiler;
  CompiledKernel compiled;
  std::string source = specializationSource(spec), name = kernelNameExpression(spec);
  if (!traits_override.empty()) {
    source = replaceAll(source, "PrefillTraits<", traits_override + "<");
    name = replaceAll(name, "PrefillTraits<", traits_override + "<");
  }
  Status st = compiler.compile(source, name, NvrtcOptions(), &compiled);
  if (!st.isOk()) {
    std::printf("FAIL compile %s: %s\n", specName(spec).c_str(), st.message().c_str());
    return false;
  }
  EXPECT_CU(cuModuleLoadData(&k->module, compiled.cubin.data()));
  EXPECT_CU(cuModuleGetFunction(&k->function, k->module, compiled.lowered_name.c_str()));
  CUdeviceptr ptr;
  size_t bytes;
  EXPECT_CU(cuModuleGetGlobal(&ptr, &bytes, k->module, "txc_kernel_threads"));
  EXPECT_CU(cuMemcpyDtoH(&k->threads, ptr, sizeof(int)));
  EXPECT_CU(cuModuleGetGlobal(&ptr, &bytes, k->module, "txc_kernel_smem_bytes"));
  EXPECT_CU(cuMemcpyDtoH(&k->smem_bytes, ptr, sizeof(int)));
  EXPECT_CU(cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem_bytes));
  return true;
}

template <typename T> T *deviceAlloc(size_t n) {
  T *p = nullptr;
  cudaMalloc(&p, n * sizeof(T));
  return p;
}
template <typename T> T *deviceCopy(const std::vector<T> &v) {
  T *p = deviceAlloc<T>(v.size());
  cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

/// One case: sequences of q_lens query rows over kv_lens keys in a paged
/// cache of page 16 (decode: q_len 1).
bool runCase(const AttentionKernelSpec &spec, int qo_heads, int kv_heads, std::vector<int> q_lens,
             std::vector<int> kv_lens, unsigned long long seed, const std::string &traits_override = "") {
  const int d = spec.head_dim, page = spec.page_size, batch = (int)kv_lens.size();
  LoadedKernel kernel;
  if (!loadKernel(spec, &kernel, traits_override))
    return false;
  std::mt19937 rng(seed);
  std::vector<int> cu_q(batch + 1, 0);
  int max_pages = 1, total_pages = 0;
  for (int b = 0; b < batch; ++b) {
    cu_q[b + 1] = cu_q[b] + q_lens[b];
    max_pages = std::max(max_pages, (kv_lens[b] + page - 1) / page);
    total_pages += (kv_lens[b] + page - 1) / page;
  }
  std::vector<int> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> table((size_t)batch * max_pages, 0);
  for (int b = 0, next = 0; b < batch; ++b)
    for (int p = 0; p < (kv_lens[b] + page - 1) / page; ++p)
      table[(size_t)b * max_pages + p] = perm[next++];

  const size_t kv_elems = (size_t)total_pages * kv_heads * page * d;
  const size_t q_elems = (size_t)cu_q[batch] * qo_heads * d;
  __nv_bfloat16 *k = deviceAlloc<__nv_bfloat16>(kv_elems), *v = deviceAlloc<__nv_bfloat16>(kv_elems);
  __nv_bfloat16 *q = deviceAlloc<__nv_bfloat16>(q_elems), *o = deviceAlloc<__nv_bfloat16>(q_elems);
  txc::bench::fillUniformKernel<<<256, 256>>>(k, (long long)kv_elems, seed * 3 + 1, 2.f);
  txc::bench::fillUniformKernel<<<256, 256>>>(v, (long long)kv_elems, seed * 3 + 2, 1.f);
  txc::bench::fillUniformKernel<<<256, 256>>>(q, (long long)q_elems, seed * 3 + 3, 1.f);
  EXPECT_CUDA(cudaMemset(o, 0xFF, q_elems * 2));
  int *d_table = deviceCopy(table), *d_kv_lens = deviceCopy(kv_lens), *d_cu_q = deviceCopy(cu_q);

  KVCacheView view;
  view.k = k;
  view.v = v;
  view.page_table = d_table;
  view.page_table_stride = max_pages;
  view.page_size = page;
  view.page_size_log2 = (int)std::log2(page);
  view.token_stride = d;
  view.head_stride = (long long)page * d;
  view.page_stride = (long long)kv_heads * page * d;
  const float scale = 1.f / std::sqrt((float)d);

  dim3 grid;
  DecodeParams dp;
  PrefillParams pp;
  void *args[1];
  if (spec.kind == AttentionKernelKind::kDecode) {
    dp.q = q;
    dp.q_batch_stride = (long long)qo_heads * d;
    dp.q_head_stride = d;
    dp.o = o;
    dp.o_batch_stride = dp.q_batch_stride;
    dp.o_head_stride = d;
    dp.kv = view;
    dp.kv_lens = d_kv_lens;
    dp.batch = batch;
    dp.num_qo_heads = qo_heads;
    dp.num_kv_heads = kv_heads;
    dp.variant.sm_scale = scale;
    dp.variant.sm_scale_log2 = scale * 1.4426950408889634f;
    dp.num_splits = 1;
    grid = dim3(1, kv_heads, batch);
    args[0] = &dp;
  } else {
    pp.q = q;
    pp.q_token_stride = (long long)qo_heads * d;
    pp.q_head_stride = d;
    pp.o = o;
    pp.o_token_stride = pp.q_token_stride;
    pp.o_head_stride = d;
    pp.kv = view;
    pp.cu_seqlens_q = d_cu_q;
    pp.maybe_kv_lens = d_kv_lens;
    pp.batch = batch;
    pp.num_qo_heads = qo_heads;
    pp.num_kv_heads = kv_heads;
    pp.max_seqlen_q = *std::max_element(q_lens.begin(), q_lens.end());
    pp.variant.sm_scale = scale;
    pp.variant.sm_scale_log2 = scale * 1.4426950408889634f;
    // 64-row query blocks: the single-warpgroup kernel's kBlockM; the
    // warp-specialized kernel (128 rows) lets the surplus CTAs exit.
    grid = dim3((pp.max_seqlen_q + 63) / 64, qo_heads, batch);
    args[0] = &pp;
  }
  EXPECT_CU(cuLaunchKernel(kernel.function, grid.x, grid.y, grid.z, kernel.threads, 1, 1, kernel.smem_bytes, nullptr,
                           args, nullptr));
  EXPECT_CUDA(cudaDeviceSynchronize());

  txc::bench::ReferenceArgs ra;
  ra.q = q;
  ra.q_token_stride = (long long)qo_heads * d;
  ra.q_head_stride = d;
  ra.kv = view;
  ra.cu_seqlens_q = d_cu_q;
  ra.kv_lens = d_kv_lens;
  ra.num_qo_heads = qo_heads;
  ra.num_kv_heads = kv_heads;
  ra.head_dim = d;
  ra.causal = spec.causal;
  ra.sm_scale = scale;
  ra.max_kv_len = *std::max_element(kv_lens.begin(), kv_lens.end());
  const int rows = cu_q[batch];
  std::vector<int> tokens(rows), seqs(rows);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (int b = 0; b < batch; ++b)
    for (int t = cu_q[b]; t < cu_q[b + 1]; ++t)
      seqs[t] = b;
  int *d_tokens = deviceCopy(tokens), *d_seqs = deviceCopy(seqs);
  float *ref = deviceAlloc<float>(q_elems);
  double *scratch = deviceAlloc<double>((size_t)rows * qo_heads * ra.max_kv_len);
  txc::bench::referenceAttentionKernel<__nv_bfloat16><<<dim3(rows, qo_heads), 256>>>(ra, d_tokens, d_seqs, ref, scratch);
  EXPECT_CUDA(cudaDeviceSynchronize());
  std::vector<float> ref_host(q_elems);
  std::vector<__nv_bfloat16> out_host(q_elems);
  cudaMemcpy(ref_host.data(), ref, q_elems * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(out_host.data(), o, q_elems * 2, cudaMemcpyDeviceToHost);
  double err2 = 0, ref2 = 0;
  long long nan_count = 0;
  for (size_t i = 0; i < q_elems; ++i) {
    const double got = __bfloat162float(out_host[i]);
    nan_count += std::isnan(got);
    err2 += (got - ref_host[i]) * (got - ref_host[i]);
    ref2 += (double)ref_host[i] * ref_host[i];
  }
  const double rel = std::sqrt(err2 / ref2);
  const bool pass = nan_count == 0 && rel < 1.5e-2;
  std::printf("%s %-36s threads %d smem %6d rel_err %.2e unwritten %lld %s\n", pass ? "PASS" : "FAIL",
              specName(spec).c_str(), kernel.threads, kernel.smem_bytes, rel, nan_count, traits_override.c_str());
  for (void *p : std::initializer_list<void *>{k, v, q, o, d_table, d_kv_lens, d_cu_q, d_tokens, d_seqs, ref, scratch})
    cudaFree(p);
  cuModuleUnload(kernel.module);
  return pass;
}

} // namespace

int main() {
  if (cudaFree(nullptr) != cudaSuccess) { // creates the primary context the driver calls use
    std::printf("FAIL: no CUDA device\n");
    return 2;
  }
  AttentionKernelSpec decode_gqa;
  decode_gqa.kind = AttentionKernelKind::kDecode;
  decode_gqa.head_dim = 128;
  decode_gqa.group_size = 4;
  decode_gqa.page_size = 16;
  AttentionKernelSpec decode_mha = decode_gqa;
  decode_mha.group_size = 1;
  decode_mha.head_dim = 64;
  AttentionKernelSpec prefill;
  prefill.kind = AttentionKernelKind::kPrefill;
  prefill.head_dim = 128;
  prefill.page_size = 16;
  prefill.causal = true;

  bool ok = true;
  ok &= runCase(decode_gqa, 32, 8, {1, 1, 1}, {1, 700, 3001}, 11);
  ok &= runCase(decode_mha, 8, 8, {1, 1}, {33, 1500}, 12);
  ok &= runCase(prefill, 16, 4, {100, 1, 257}, {1100, 40, 257}, 13);
  // Both prefill kernels compile through NVRTC, whichever is the default.
  ok &= runCase(prefill, 16, 4, {100, 1, 257}, {1100, 40, 257}, 14, "PrefillSm90Traits");
  ok &= runCase(prefill, 16, 4, {100, 1, 257}, {1100, 40, 257}, 15, "PrefillSingleWgTraits");
  std::printf("%s\n", ok ? "nvrtc attention: all passed" : "nvrtc attention: FAILED");
  return ok ? 0 : 1;
}
