//===- KernelTest.cpp - Each CPU kernel against a scalar reference ---------===//
//
// Fresh random inputs (never zeros), outputs pre-filled with NaN so a skipped
// element shows, references in double over the stored input values, and
// every storage dtype. Tolerances: the output dtype's rounding plus fp32
// accumulation slack (toleranceFor).
//
//===----------------------------------------------------------------------===//
#include "TestTensors.h"

#include "runtime/backends/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace txc::cpu::testing {
namespace {

const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

class KernelTest : public ::testing::TestWithParam<DType> {
protected:
  std::mt19937 rng{1234};
  ThreadPool pool{3}; // more threads than the 2-core CI box: chunking is exercised
};

INSTANTIATE_TEST_SUITE_P(Dtypes, KernelTest, ::testing::ValuesIn(kDtypes),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

void expectMatches(const TestTensor &actual, const std::vector<double> &expected,
                   const std::string &what) {
  ASSERT_EQ(expected.size(), static_cast<size_t>(actual.rows * actual.cols));
  for (int64_t r = 0; r < actual.rows; ++r)
    for (int64_t c = 0; c < actual.cols; ++c) {
      double e = expected[r * actual.cols + c];
      ASSERT_NEAR(actual.at(r, c), e, toleranceFor(actual.dtype, e))
          << what << " at [" << r << ", " << c << "]";
    }
}

TEST_P(KernelTest, Embedding) {
  DType dtype = GetParam();
  TestTensor table = randomTensor(dtype, 20, 12, rng);
  std::vector<int32_t> tokens = {30, 10, 29, 9, 15, 50, 11};
  const int64_t vocab_start = 10; // a shard holding tokens [10, 30)
  TestTensor out = poisonedTensor(dtype, 7, 12);
  ASSERT_TRUE(embeddingKernel(tokens.data(), 7, table.view(), vocab_start, out.mut(), pool).isOk());
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t c = 0; c < 12; ++c) {
      int64_t local = tokens[t] - vocab_start;
      double expected = local >= 0 && local < 20 ? table.at(local, c) : 0.0;
      ASSERT_EQ(out.at(t, c), expected) << "token " << t;
    }
}

std::vector<double> referenceRmsNorm(const TestTensor &x, const TestTensor &w, double eps) {
  std::vector<double> y(static_cast<size_t>(x.rows * x.cols));
  int64_t group = w.cols;
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t g = 0; g < x.cols; g += group) {
      double ms = 0;
      for (int64_t i = 0; i < group; ++i)
        ms += x.at(r, g + i) * x.at(r, g + i);
      ms /= static_cast<double>(group);
      for (int64_t i = 0; i < group; ++i)
        y[r * x.cols + g + i] = x.at(r, g + i) / std::sqrt(ms + eps) * w.at(0, i);
    }
  return y;
}

TEST_P(KernelTest, RmsNormWholeRowAndPerGroup) {
  DType dtype = GetParam();
  TestTensor x = randomTensor(dtype, 9, 48, rng, -3, 3);
  for (int64_t group : {48, 16}) {
    TestTensor w = randomTensor(dtype, 1, group, rng, 0.5, 1.5);
    TestTensor y = poisonedTensor(dtype, 9, 48);
    ASSERT_TRUE(rmsNormKernel(x.view(), w.view(), 1e-6, y.mut(), pool).isOk());
    expectMatches(y, referenceRmsNorm(x, w, 1e-6), "group " + std::to_string(group));
  }
  TestTensor bad = randomTensor(dtype, 1, 13, rng);
  TestTensor y = poisonedTensor(dtype, 9, 48);
  EXPECT_FALSE(rmsNormKernel(x.view(), bad.view(), 1e-6, y.mut(), pool).isOk());
}

TEST_P(KernelTest, AddRmsNorm) {
  DType dtype = GetParam();
  TestTensor x = randomTensor(dtype, 6, 32, rng, -2, 2);
  TestTensor residual = randomTensor(dtype, 6, 32, rng, -2, 2);
  TestTensor w = randomTensor(dtype, 1, 32, rng, 0.5, 1.5);
  TestTensor sum = poisonedTensor(dtype, 6, 32), normed = poisonedTensor(dtype, 6, 32);
  ASSERT_TRUE(addRmsNormKernel(x.view(), residual.view(), w.view(), 1e-5, sum.mut(),
                               normed.mut(), pool).isOk());
  std::vector<double> expected_sum;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 32; ++c)
      expected_sum.push_back(x.at(r, c) + residual.at(r, c));
  expectMatches(sum, expected_sum, "sum");
  // normed is rms_norm of the stored sum.
  expectMatches(normed, referenceRmsNorm(sum, w, 1e-5), "normed");
}

struct GemmCase {
  GemmEpilogue epilogue;
  bool bias;
};

TEST_P(KernelTest, GemmEveryEpilogue) {
  DType dtype = GetParam();
  const int64_t m = 5, k = 37, n = 22; // k not a multiple of the 8-wide dot
  for (GemmCase c : {GemmCase{GemmEpilogue::kNone, false}, GemmCase{GemmEpilogue::kNone, true},
                     GemmCase{GemmEpilogue::kResidualAdd, true},
                     GemmCase{GemmEpilogue::kResidualAdd, false},
                     GemmCase{GemmEpilogue::kSwiglu, false}, GemmCase{GemmEpilogue::kSwiglu, true}}) {
    TestTensor x = randomTensor(dtype, m, k, rng);
    TestTensor w = randomTensor(dtype, n, k, rng, -0.3, 0.3);
    TestTensor bias = randomTensor(dtype, 1, n, rng);
    int64_t out_cols = c.epilogue == GemmEpilogue::kSwiglu ? n / 2 : n;
    TestTensor residual = randomTensor(dtype, m, out_cols, rng);
    TestTensor out = poisonedTensor(dtype, m, out_cols);
    ASSERT_TRUE(gemmKernel(x.view(), w.view(), c.bias ? bias.view() : ConstMatrix{}, c.epilogue,
                           c.epilogue == GemmEpilogue::kResidualAdd ? residual.view() : ConstMatrix{},
                           out.mut(), pool).isOk());
    auto acc = [&](int64_t r, int64_t j) {
      double s = c.bias ? bias.at(0, j) : 0.0;
      for (int64_t i = 0; i < k; ++i)
        s += x.at(r, i) * w.at(j, i);
      return s;
    };
    std::vector<double> expected;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < out_cols; ++j) {
        if (c.epilogue == GemmEpilogue::kSwiglu) {
          double gate = acc(r, j), up = acc(r, j + out_cols);
          expected.push_back(gate / (1.0 + std::exp(-gate)) * up);
        } else {
          expected.push_back(acc(r, j) + (c.epilogue == GemmEpilogue::kResidualAdd
                                              ? residual.at(r, j) : 0.0));
        }
      }
    expectMatches(out, expected, "epilogue " + std::to_string(static_cast<int>(c.epilogue)) +
                                     (c.bias ? " with bias" : ""));
  }
}

TEST_P(KernelTest, GemmInPlaceResidual) {
  // The plan may write a residual GEMM's result over its residual.
  DType dtype = GetParam();
  TestTensor x = randomTensor(dtype, 4, 16, rng);
  TestTensor w = randomTensor(dtype, 16, 16, rng, -0.3, 0.3);
  TestTensor h = randomTensor(dtype, 4, 16, rng);
  TestTensor original = h;
  ASSERT_TRUE(gemmKernel(x.view(), w.view(), {}, GemmEpilogue::kResidualAdd, h.view(),
                         h.mut(), pool).isOk());
  std::vector<double> expected;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 16; ++j) {
      double s = original.at(r, j);
      for (int64_t i = 0; i < 16; ++i)
        s += x.at(r, i) * w.at(j, i);
      expected.push_back(s);
    }
  expectMatches(h, expected, "in place");
}

// A small ragged batch: sequences with different new-token counts and
// contexts, pages shuffled so block tables matter, unused pages NaN.
struct PagedFixture {
  int64_t page_size = 4, num_pages = 24, kv_heads = 2, head_dim = 16;
  std::vector<int32_t> new_tokens = {5, 1, 3, 1};
  std::vector<int32_t> context = {5, 11, 9, 1};
  int32_t max_pages = 4;
  std::vector<int32_t> offsets, block_tables, slots, positions;
  TestTensor cache;
  KvCacheLayer layer;
  BatchView view;

  PagedFixture(DType dtype, std::mt19937 &rng) {
    std::vector<int32_t> pages(num_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    size_t next_page = 0;
    offsets.push_back(0);
    for (size_t s = 0; s < context.size(); ++s) {
      offsets.push_back(offsets.back() + new_tokens[s]);
      for (int32_t p = 0; p < max_pages; ++p)
        block_tables.push_back(p * page_size < context[s] ? pages[next_page++] : -1);
      for (int32_t i = context[s] - new_tokens[s]; i < context[s]; ++i) {
        positions.push_back(i);
        slots.push_back(block_tables[s * max_pages + i / page_size] * page_size + i % page_size);
      }
    }
    int64_t page_elements = 2 * page_size * kv_heads * head_dim;
    cache = poisonedTensor(dtype, num_pages, page_elements);
    layer = {cache.bytes.data(), dtype, num_pages, page_size, kv_heads, head_dim};
    // Fill every token's K and V of the used pages (earlier tokens of the
    // context are "cached from previous steps").
    for (size_t s = 0; s < context.size(); ++s)
      for (int32_t i = 0; i < context[s]; ++i) {
        int64_t slot = block_tables[s * max_pages + i / page_size] * page_size + i % page_size;
        for (int which = 0; which < 2; ++which)
          for (int64_t h = 0; h < kv_heads; ++h)
            for (int64_t d = 0; d < head_dim; ++d)
              storeElement(cache.bytes.data(), dtype, layer.elementIndex(which, slot, h) + d,
                           std::uniform_real_distribution<float>(-1, 1)(rng));
      }
    view = {offsets.data(), context.data(), block_tables.data(), slots.data(),
            static_cast<int32_t>(context.size()), offsets.back(), max_pages};
  }
  double kv(int which, int32_t s, int64_t j, int64_t h, int64_t d) const {
    int64_t slot = block_tables[s * max_pages + j / page_size] * page_size + j % page_size;
    return loadElement(cache.bytes.data(), cache.dtype, layer.elementIndex(which, slot, h) + d);
  }
};

struct AttentionCase {
  bool causal;
  int64_t window;
  double softcap;
};

TEST_P(KernelTest, PagedAttentionGqaCausalWindowSoftcap) {
  DType dtype = GetParam();
  PagedFixture fx(dtype, rng);
  const int64_t heads = 6; // 3 query heads per KV head
  for (AttentionCase c : {AttentionCase{true, 0, 0.0}, AttentionCase{true, 3, 0.0},
                          AttentionCase{true, 0, 2.0}, AttentionCase{true, 4, 1.5},
                          AttentionCase{false, 0, 0.0}}) {
    TestTensor q = randomTensor(dtype, fx.view.num_tokens, heads * fx.head_dim, rng, -2, 2);
    TestTensor out = poisonedTensor(dtype, fx.view.num_tokens, heads * fx.head_dim);
    AttentionParams params{heads, fx.kv_heads, fx.head_dim, 1.0 / std::sqrt(16.0),
                           c.causal, c.window, c.softcap};
    Status status = attentionKernel(q.view(), fx.layer, fx.view, params, out.mut(), pool);
    ASSERT_TRUE(status.isOk()) << status.toString();
    std::vector<double> expected;
    for (int32_t s = 0; s < fx.view.num_seqs; ++s)
      for (int32_t t = fx.offsets[s]; t < fx.offsets[s + 1]; ++t) {
        int64_t pos = fx.positions[t];
        for (int64_t h = 0; h < heads; ++h) {
          int64_t kvh = h / 3;
          std::vector<double> logits, weights;
          std::vector<int64_t> keys;
          for (int64_t j = 0; j < fx.context[s]; ++j) {
            if (c.causal && j > pos) continue;
            if (c.window > 0 && !(pos - c.window < j)) continue;
            double dot = 0;
            for (int64_t d = 0; d < fx.head_dim; ++d)
              dot += q.at(t, h * fx.head_dim + d) * fx.kv(0, s, j, kvh, d);
            dot *= params.scale;
            if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
            logits.push_back(dot);
            keys.push_back(j);
          }
          double mx = *std::max_element(logits.begin(), logits.end()), total = 0;
          for (double l : logits) total += std::exp(l - mx);
          for (int64_t d = 0; d < fx.head_dim; ++d) {
            double o = 0;
            for (size_t k = 0; k < keys.size(); ++k)
              o += std::exp(logits[k] - mx) / total * fx.kv(1, s, keys[k], kvh, d);
            expected.push_back(o);
          }
        }
      }
    expectMatches(out, expected, "causal " + std::to_string(c.causal) + " window " +
                                     std::to_string(c.window) + " softcap " +
                                     std::to_string(c.softcap));
  }
}

TEST_P(KernelTest, AttentionRejectsBlockTableOutsideCache) {
  PagedFixture fx(GetParam(), rng);
  fx.block_tables[0] = static_cast<int32_t>(fx.num_pages);
  TestTensor q = randomTensor(GetParam(), fx.view.num_tokens, 2 * fx.head_dim, rng);
  TestTensor out = poisonedTensor(GetParam(), fx.view.num_tokens, 2 * fx.head_dim);
  Status status = attentionKernel(q.view(), fx.layer, fx.view,
                                  {2, 2, fx.head_dim, 0.25, true, 0, 0.0}, out.mut(), pool);
  EXPECT_EQ(status.code(), StatusCode::kOutOfRange) << status.toString();
}

TEST_P(KernelTest, AttentionAndRopeAppendRejectACacheOfOtherGeometry) {
  PagedFixture fx(GetParam(), rng);
  // The launch says one KV head more than the cache layer holds.
  const int64_t kv = fx.kv_heads + 1, hd = fx.head_dim;
  TestTensor q = randomTensor(GetParam(), fx.view.num_tokens, 2 * kv * hd, rng);
  TestTensor out = poisonedTensor(GetParam(), fx.view.num_tokens, 2 * kv * hd);
  Status status = attentionKernel(q.view(), fx.layer, fx.view, {2 * kv, kv, hd, 0.25, true, 0, 0.0},
                                  out.mut(), pool);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.toString();
  EXPECT_NE(status.message().find("KV cache layer holds " + std::to_string(fx.kv_heads) + " heads of " +
                                  std::to_string(hd) + ", the launch " + std::to_string(kv) + " of"),
            std::string::npos)
      << status.message();

  RopeAppendParams params;
  params.num_heads = 2 * kv;
  params.num_kv_heads = kv;
  params.head_dim = hd;
  params.rope.theta = 10000.0;
  params.rope.rotary_dim = hd;
  TestTensor qkv = randomTensor(GetParam(), fx.view.num_tokens, 4 * kv * hd, rng);
  status = ropeAppendKernel(qkv.view(), fx.positions.data(), fx.layer, fx.view, params, ConstMatrix(),
                            ConstMatrix(), out.mut(), pool);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.toString();
  EXPECT_NE(status.message().find("KV cache layer holds"), std::string::npos) << status.message();
}

TEST_P(KernelTest, RopeAppendQkNormPartialRotaryAndCacheWrite) {
  DType dtype = GetParam();
  PagedFixture fx(dtype, rng);
  const int64_t heads = 4, kv = fx.kv_heads, hd = fx.head_dim;
  RopeAppendParams params;
  params.num_heads = heads;
  params.num_kv_heads = kv;
  params.head_dim = hd;
  params.rope.theta = 10000.0;
  params.rope.rotary_dim = 8; // half of the head rotates
  params.norm_eps = 1e-6;
  TestTensor qkv = randomTensor(dtype, fx.view.num_tokens, (heads + 2 * kv) * hd, rng, -2, 2);
  TestTensor q_norm = randomTensor(dtype, 1, hd, rng, 0.5, 1.5);
  TestTensor k_norm = randomTensor(dtype, 1, hd, rng, 0.5, 1.5);
  TestTensor out = poisonedTensor(dtype, fx.view.num_tokens, heads * hd);
  Status status = ropeAppendKernel(qkv.view(), fx.positions.data(), fx.layer, fx.view, params,
                                   q_norm.view(), k_norm.view(), out.mut(), pool);
  ASSERT_TRUE(status.isOk()) << status.toString();

  // Reference: rms-norm the head, rotate pairs (i, i + 4) of the first 8
  // dims by position * 10000^(-2i/8), leave dims 8..15.
  auto reference = [&](int64_t t, int64_t head, const TestTensor &norm) {
    std::vector<double> x(hd);
    double ms = 0;
    for (int64_t d = 0; d < hd; ++d) {
      x[d] = qkv.at(t, head * hd + d);
      ms += x[d] * x[d];
    }
    ms /= hd;
    for (int64_t d = 0; d < hd; ++d)
      x[d] = x[d] / std::sqrt(ms + 1e-6) * norm.at(0, d);
    std::vector<double> y = x;
    for (int64_t i = 0; i < 4; ++i) {
      double angle = fx.positions[t] * std::pow(10000.0, -2.0 * i / 8.0);
      y[i] = x[i] * std::cos(angle) - x[i + 4] * std::sin(angle);
      y[i + 4] = x[i + 4] * std::cos(angle) + x[i] * std::sin(angle);
    }
    return y;
  };
  std::vector<double> expected_q;
  for (int64_t t = 0; t < fx.view.num_tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (double v : reference(t, h, q_norm))
        expected_q.push_back(v);
  expectMatches(out, expected_q, "rotated q");
  for (int64_t t = 0; t < fx.view.num_tokens; ++t)
    for (int64_t h = 0; h < kv; ++h) {
      std::vector<double> k = reference(t, heads + h, k_norm);
      for (int64_t d = 0; d < hd; ++d) {
        double key = loadElement(fx.cache.bytes.data(), dtype,
                                 fx.layer.elementIndex(0, fx.slots[t], h) + d);
        double value = loadElement(fx.cache.bytes.data(), dtype,
                                   fx.layer.elementIndex(1, fx.slots[t], h) + d);
        ASSERT_NEAR(key, k[d], toleranceFor(dtype, k[d])) << "K token " << t;
        ASSERT_EQ(value, qkv.at(t, (heads + kv + h) * hd + d)) << "V token " << t;
      }
    }
}

TEST_P(KernelTest, GatherLast) {
  DType dtype = GetParam();
  PagedFixture fx(dtype, rng);
  TestTensor in = randomTensor(dtype, fx.view.num_tokens, 10, rng);
  TestTensor out = poisonedTensor(dtype, fx.view.num_seqs, 10);
  ASSERT_TRUE(gatherLastKernel(in.view(), fx.view, out.mut()).isOk());
  for (int32_t s = 0; s < fx.view.num_seqs; ++s)
    for (int64_t c = 0; c < 10; ++c)
      ASSERT_EQ(out.at(s, c), in.at(fx.offsets[s + 1] - 1, c)) << "sequence " << s;
}

TEST_P(KernelTest, AllReduceIsIdenticalOnEveryRank) {
  DType dtype = GetParam();
  std::vector<TestTensor> parts;
  for (int r = 0; r < 3; ++r)
    parts.push_back(randomTensor(dtype, 7, 20, rng));
  std::vector<TestTensor> before = parts;
  std::vector<Matrix> views;
  for (TestTensor &p : parts)
    views.push_back(p.mut());
  ASSERT_TRUE(allReduceSum(views, pool).isOk());
  std::vector<double> expected;
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 20; ++c)
      expected.push_back(before[0].at(r, c) + before[1].at(r, c) + before[2].at(r, c));
  for (int rank = 0; rank < 3; ++rank) {
    expectMatches(parts[rank], expected, "rank " + std::to_string(rank));
    EXPECT_EQ(parts[rank].bytes, parts[0].bytes) << "rank " << rank << " differs from rank 0";
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallelFor(1000, 3, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      hits[i]++;
  });
  for (size_t i = 0; i < hits.size(); ++i)
    ASSERT_EQ(hits[i].load(), 1) << "index " << i;
}

} // namespace
} // namespace txc::cpu::testing
