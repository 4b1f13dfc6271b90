//===- QkvAttentionTest.cpp - The fused QKV projection and attention ------===//
//
// QkvAttention.cu against an fp64 reference of the two-kernel path it
// replaces (the QKV GEMV with the fused input norm, rounded to the storage
// type; q/k-norm and rotary, rounded; attention over the paged context and
// the new key): fresh random inputs, the output poisoned with NaN, pages
// scattered, contexts from one key to the kernel's limit (chunks empty,
// partial and full), clusters of 16 and 8 CTAs exchanging through cluster
// barriers or pushes, GQA groups 2, 4 and 8, bf16
// and fp16, with and without q/k-norm and bias, K in one pass and in
// several. The appended key and
// value are checked in the cache, and the cache's other slots untouched.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"
#include "TestTensors.h"

#include "runtime/backends/cuda/QkvAttention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

using cpu::testing::poisonedTensor;
using cpu::testing::randomTensor;
using cpu::testing::TestTensor;

struct QkvAttentionCase {
  DType dtype;
  int heads, kv_heads;
  int64_t k;
  int kv_len;
  bool qk_norm;
  bool bias;
  int cluster = 16;
  QkvAttentionExchange exchange = QkvAttentionExchange::kClusterBarriers;
  int warps = 16;
};

constexpr int kHeadDim = 128;
constexpr int kPageSize = 16;

double roundTo(DType dtype, double v) {
  TestTensor t(dtype, 1, 1);
  t.set(0, 0, v);
  return t.at(0, 0);
}

void *upload(const void *data, size_t bytes) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}
void *upload(const TestTensor &t) { return upload(t.bytes.data(), t.bytes.size()); }

void runCase(const QkvAttentionCase &c) {
  SCOPED_TRACE(std::string(c.dtype == DType::kBF16 ? "bf16" : "f16") + " heads " +
               std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " k " +
               std::to_string(c.k) + " kv_len " + std::to_string(c.kv_len) +
               (c.qk_norm ? " qk-norm" : "") + (c.bias ? " bias" : "") + " cluster " +
               std::to_string(c.cluster) +
               (c.exchange == QkvAttentionExchange::kPush ? " push" : " barriers") + " warps " +
               std::to_string(c.warps));
  const int D = kHeadDim, G = c.heads / c.kv_heads;
  const int64_t n = static_cast<int64_t>(c.heads + 2 * c.kv_heads) * D;
  std::mt19937 rng(static_cast<uint32_t>(c.heads * 7919 + c.k * 31 + c.kv_len));
  TestTensor x = randomTensor(c.dtype, 1, c.k, rng);
  TestTensor w = randomTensor(c.dtype, n, c.k, rng, -0.05, 0.05);
  TestTensor bias = randomTensor(DType::kF32, 1, n, rng, -0.2, 0.2);
  TestTensor q_norm = randomTensor(c.dtype, 1, D, rng, 0.5, 1.5);
  TestTensor k_norm = randomTensor(c.dtype, 1, D, rng, 0.5, 1.5);
  const double norm_eps = 1e-6, qk_eps = 1e-6;

  // The token's rotary factors at its position (HF's inv_freq, theta 1e6).
  const int position = c.kv_len - 1;
  std::vector<float> rope(D);
  for (int i = 0; i < D / 2; ++i) {
    const float inv_freq = static_cast<float>(std::pow(1e6, -2.0 * i / D));
    const float angle = inv_freq * static_cast<float>(position);
    rope[2 * i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    rope[2 * i + 1] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }

  // A paged cache of more pages than the sequence needs, its pages in a
  // shuffled order; every slot random (the new token's slot too: it must be
  // overwritten).
  const int pages_needed = (c.kv_len + kPageSize - 1) / kPageSize;
  const int num_pages = pages_needed + 3;
  const int64_t token_stride = static_cast<int64_t>(c.kv_heads) * D;
  const int64_t page_stride = 2 * kPageSize * token_stride;
  TestTensor cache = randomTensor(c.dtype, num_pages, page_stride, rng);
  std::vector<int> pages(num_pages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  pages.resize(pages_needed);
  auto element = [&](int token, bool value, int h, int d) {
    const int64_t page = pages[token / kPageSize];
    return page * page_stride + (value ? kPageSize * token_stride : 0) +
           static_cast<int64_t>(token % kPageSize) * token_stride + static_cast<int64_t>(h) * D + d;
  };
  auto cacheAt = [&](int64_t e) { return cache.at(e / page_stride, e % page_stride); };
  const int slot = pages[position / kPageSize] * kPageSize + position % kPageSize;

  // The reference: the QKV rows rounded as the GEMV stores them.
  double squares = 0.0;
  for (int64_t i = 0; i < c.k; ++i)
    squares += x.at(0, i) * x.at(0, i);
  const double inv_rms = 1.0 / std::sqrt(squares / static_cast<double>(c.k) + norm_eps);
  std::vector<double> qkv(n);
  for (int64_t r = 0; r < n; ++r) {
    double dot = 0.0;
    for (int64_t i = 0; i < c.k; ++i)
      dot += w.at(r, i) * x.at(0, i);
    qkv[r] = roundTo(c.dtype, dot * inv_rms + (c.bias ? bias.at(0, r) : 0.0));
  }
  // q/k-norm and rotary of one head in place, rounded.
  auto finishHead = [&](double *head, const TestTensor *norm) {
    if (norm) {
      double ss = 0.0;
      for (int d = 0; d < D; ++d)
        ss += head[d] * head[d];
      const double r = 1.0 / std::sqrt(ss / D + qk_eps);
      for (int d = 0; d < D; ++d)
        head[d] = head[d] * r * norm->at(0, d);
    }
    for (int i = 0; i < D / 2; ++i) {
      const double a = head[i], b = head[i + D / 2];
      head[i] = a * rope[2 * i] - b * rope[2 * i + 1];
      head[i + D / 2] = b * rope[2 * i] + a * rope[2 * i + 1];
    }
    for (int d = 0; d < D; ++d)
      head[d] = roundTo(c.dtype, head[d]);
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> expected(static_cast<size_t>(c.heads) * D);
  std::vector<std::vector<double>> new_k(c.kv_heads), new_v(c.kv_heads);
  for (int h = 0; h < c.kv_heads; ++h) {
    new_k[h].assign(qkv.begin() + (c.heads + h) * D, qkv.begin() + (c.heads + h + 1) * D);
    new_v[h].assign(qkv.begin() + (c.heads + c.kv_heads + h) * D,
                    qkv.begin() + (c.heads + c.kv_heads + h + 1) * D);
    finishHead(new_k[h].data(), c.qk_norm ? &k_norm : nullptr);
    for (int g = 0; g < G; ++g) {
      const int qh = h * G + g;
      std::vector<double> q(qkv.begin() + qh * D, qkv.begin() + (qh + 1) * D);
      finishHead(q.data(), c.qk_norm ? &q_norm : nullptr);
      std::vector<double> s(c.kv_len);
      double m = -INFINITY;
      for (int t = 0; t < c.kv_len; ++t) {
        double dot = 0.0;
        for (int d = 0; d < D; ++d)
          dot += q[d] * (t == position ? new_k[h][d] : cacheAt(element(t, false, h, d)));
        s[t] = dot * scale;
        m = std::max(m, s[t]);
      }
      double l = 0.0;
      for (double &v : s)
        l += (v = std::exp(v - m));
      for (int d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int t = 0; t < c.kv_len; ++t)
          acc += s[t] * (t == position ? new_v[h][d] : cacheAt(element(t, true, h, d)));
        expected[static_cast<size_t>(qh) * D + d] = acc / l;
      }
    }
  }

  TestTensor out = poisonedTensor(c.dtype, 1, static_cast<int64_t>(c.heads) * D);
  void *dx = upload(x), *dw = upload(w), *db = upload(bias), *dqn = upload(q_norm),
       *dkn = upload(k_norm);
  void *dcache = upload(cache), *dout = upload(out);
  void *drope = upload(rope.data(), rope.size() * sizeof(float));
  void *dpages = upload(pages.data(), pages.size() * sizeof(int));
  void *dlen = upload(&c.kv_len, sizeof(int));
  void *dslot = upload(&slot, sizeof(int));

  QkvAttentionArgs a;
  a.x = dx;
  a.w = dw;
  a.bias = c.bias ? db : nullptr;
  a.bias_type = EType::kF32;
  a.type = c.dtype == DType::kBF16 ? EType::kBF16 : EType::kF16;
  a.k = c.k;
  a.norm = true;
  a.norm_eps = static_cast<float>(norm_eps);
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = D;
  a.q_norm = c.qk_norm ? dqn : nullptr;
  a.k_norm = c.qk_norm ? dkn : nullptr;
  a.qk_norm_eps = static_cast<float>(qk_eps);
  a.rope_factors = static_cast<const float *>(drope);
  a.rope_half = D / 2;
  const size_t element_bytes = 2; // bf16 and fp16
  a.kv.k = dcache;
  a.kv.v = static_cast<unsigned char *>(dcache) + kPageSize * token_stride * element_bytes;
  a.kv.page_table = static_cast<const int *>(dpages);
  a.kv.page_table_stride = pages_needed;
  a.kv.page_stride = page_stride;
  a.kv.head_stride = D;
  a.kv.token_stride = token_stride;
  a.kv.page_size = kPageSize;
  a.kv.page_size_log2 = 4;
  a.kv.num_pages = num_pages;
  a.kv_lens = static_cast<const int *>(dlen);
  a.slot_mapping = static_cast<const int *>(dslot);
  // Shared memory for exactly this context, or for the kernel's longest.
  a.max_kv_len = c.kv_len % 3 == 0 ? kQkvAttentionMaxKvLen : c.kv_len;
  a.cluster = c.cluster;
  a.exchange = c.exchange;
  a.warps = c.warps;
  a.sm_scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  a.out = dout;
  a.pdl = c.kv_len % 2 == 1; // alone on the stream, PDL must change nothing
  std::string why;
  ASSERT_TRUE(qkvAttentionSupports(a, &why)) << why;
  ASSERT_EQ(launchQkvAttention(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  TestTensor cache_after = cache;
  ASSERT_EQ(cudaMemcpy(out.bytes.data(), dout, out.bytes.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(cache_after.bytes.data(), dcache, cache.bytes.size(), cudaMemcpyDeviceToHost),
      cudaSuccess);
  for (void *p : {dx, dw, db, dqn, dkn, dcache, dout, drope, dpages, dlen, dslot})
    cudaFree(p);

  // Outputs: within bf16/fp16 rounding of the probabilities and values
  // (the kernel keeps P in fp32; the reference in double).
  double worst = 0.0;
  for (int64_t i = 0; i < out.cols; ++i) {
    const double got = out.at(0, i), want = expected[i];
    ASSERT_TRUE(std::isfinite(got)) << "output " << i << " not written";
    worst = std::max(worst, std::abs(got - want));
    EXPECT_NEAR(got, want, 1.5e-2 + 1e-2 * std::abs(want)) << "output " << i;
  }
  // The new key and value in its slot (rounded as the reference rounds,
  // within a unit or two where fp32 and fp64 round the dot products and the
  // rotation differently); every other slot as it was.
  auto cacheAfter = [&](int64_t e) { return cache_after.at(e / page_stride, e % page_stride); };
  for (int h = 0; h < c.kv_heads; ++h)
    for (int d = 0; d < D; ++d) {
      EXPECT_NEAR(cacheAfter(element(position, false, h, d)), new_k[h][d],
                  1e-2 * std::abs(new_k[h][d]) + 1e-3)
          << "key head " << h << " element " << d;
      EXPECT_NEAR(cacheAfter(element(position, true, h, d)), new_v[h][d],
                  1e-2 * std::abs(new_v[h][d]) + 1e-3)
          << "value head " << h << " element " << d;
    }
  for (int64_t e = 0; e < num_pages * page_stride; ++e) {
    const int64_t page = e / page_stride, in_page = e % page_stride;
    const int64_t in_half = in_page % (kPageSize * token_stride);
    const bool new_slot =
        page == pages[position / kPageSize] && in_half / token_stride == position % kPageSize;
    if (!new_slot && cache_after.at(page, in_page) != cache.at(page, in_page)) {
      ADD_FAILURE() << "cache element " << e << " changed";
      break;
    }
  }
  std::printf("  %s: worst |out - ref| %.3g\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->name(), worst);
}

TEST(QkvAttentionTest, MatchesTheTwoKernelPathOnQwen3Shapes) {
  TXC_SKIP_WITHOUT_GPU();
  // Qwen3-0.6B: 16 / 8 heads, hidden 1024 (K in one pass), q/k-norm; the
  // contexts put the new key in the first, a middle and the last CTA, leave
  // CTAs empty, fill pages partly and reach the kernel's limit.
  for (QkvAttentionExchange exchange :
       {QkvAttentionExchange::kClusterBarriers, QkvAttentionExchange::kPush})
    for (int cluster : {16, 8})
      for (int warps : {16, 8})
        for (int kv_len : {1, 2, 17, 100, 129, 300, 1000, kQkvAttentionMaxKvLen})
          runCase({DType::kBF16, 16, 8, 1024, kv_len, true, false, cluster, exchange, warps});
}

TEST(QkvAttentionTest, MatchesTheTwoKernelPathOnOtherShapes) {
  TXC_SKIP_WITHOUT_GPU();
  // Llama-3-8B's group of 4 over K in several passes (hidden 4096), no
  // q/k-norm; Qwen2's bias; fp16; a group of 8 with K not a multiple of the
  // 128 chunks a pass.
  runCase({DType::kBF16, 32, 8, 4096, 130, false, false});
  runCase({DType::kBF16, 16, 4, 2048, 77, false, true});
  runCase({DType::kF16, 16, 8, 1024, 45, true, false});
  runCase({DType::kF16, 16, 2, 1000, 513, false, true});
  runCase({DType::kBF16, 32, 8, 4096, 700, false, false, 8});
  runCase({DType::kF16, 16, 2, 1000, 90, false, true, 8});
  const QkvAttentionExchange push = QkvAttentionExchange::kPush;
  runCase({DType::kBF16, 32, 8, 4096, 130, false, false, 16, push});
  runCase({DType::kF16, 16, 2, 1000, 513, false, true, 16, push});
  runCase({DType::kF16, 16, 4, 2048, 77, true, true, 8, push});
  runCase({DType::kF16, 16, 2, 1000, 257, true, false, 8, push, 8}); // a group of 8 on 8 warps
  runCase({DType::kBF16, 32, 8, 4096, 40, false, true, 16, push, 8});
}

TEST(QkvAttentionTest, SupportsNamesWhatItRefuses) {
  // Host-side only: runs without a GPU.
  QkvAttentionArgs a;
  a.type = EType::kBF16;
  a.heads = 16;
  a.kv_heads = 8;
  a.head_dim = 64;
  std::string why;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "head_dim 128 (got 64)");
  a.head_dim = 128;
  a.heads = 24;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "a GQA group of 2, 4 or 8 (got 3)");
  a.heads = 16;
  a.type = EType::kF32;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "a 16-bit element type");
  // A complete set of arguments (pointers never dereferenced here), then
  // a context past the kernel's limit.
  alignas(16) static unsigned char storage[64];
  a.type = EType::kBF16;
  a.k = 1024;
  a.x = a.w = a.kv.k = a.kv.v = a.out = storage;
  a.rope_factors = reinterpret_cast<const float *>(storage);
  a.rope_half = 64;
  a.kv.page_table = a.kv_lens = a.slot_mapping = reinterpret_cast<const int *>(storage);
  a.kv.page_size = 16;
  a.kv.token_stride = 1024;
  a.kv.head_stride = 128;
  a.kv.page_stride = 32768;
  EXPECT_TRUE(qkvAttentionSupports(a, &why)) << why;
  a.max_kv_len = kQkvAttentionMaxKvLen + 1;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "contexts of at most 1024 keys (max_kv_len 1025)");
  a.max_kv_len = kQkvAttentionMaxKvLen;
  a.cluster = 4;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "clusters of 8 or 16 CTAs (got 4)");
  a.cluster = 8;
  a.warps = 4;
  EXPECT_FALSE(qkvAttentionSupports(a, &why));
  EXPECT_EQ(why, "CTAs of 8 or 16 warps (got 4)");
}

} // namespace
} // namespace txc::cuda
