//===- SamplerTest.cpp - Device sampling against the engine's sampler -----===//
//
// Fresh random logits rows (with exact ties planted), every kind of choice
// (greedy, temperature only, top-k, top-p, both, top-k 1, top-k beyond the
// vocabulary), many uniforms each, over more rows than one sorting pass:
// every device token must be the token engine::sampleToken draws on the host.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/Sampler.h"
#include "txc/engine/Sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

void checkVocabulary(int32_t vocab) {
  SCOPED_TRACE("vocabulary " + std::to_string(vocab));
  std::vector<engine::SamplingParams> kinds(11);
  kinds[1].temperature = 0.7f;
  kinds[2].temperature = 1.0f, kinds[2].top_k = 50;
  kinds[3].temperature = 1.0f, kinds[3].top_p = 0.9f;
  kinds[4].temperature = 0.8f, kinds[4].top_k = 20, kinds[4].top_p = 0.5f;
  kinds[5].temperature = 2.0f, kinds[5].top_p = 0.99f;
  kinds[6].temperature = 1.0f, kinds[6].top_k = 1;
  kinds[7].temperature = 1.5f, kinds[7].top_k = vocab + 5;
  kinds[8].temperature = 0.3f, kinds[8].top_p = 0.2f;
  kinds[9].temperature = 5.0f;
  kinds[10].temperature = 1.0f, kinds[10].top_k = 3, kinds[10].top_p = 0.999f;
  const int32_t rows = 2 * kSamplerRowsPerPass + 3;
  std::mt19937 rng(static_cast<uint32_t>(vocab));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (float &v : logits)
    v = normal(rng);
  for (int32_t r = 0; r < rows; ++r) { // ties at the top and inside
    float *row = logits.data() + static_cast<size_t>(r) * vocab;
    float top = *std::max_element(row, row + vocab) + 1.0f;
    row[vocab / 3] = row[vocab / 2] = top;
    row[7] = row[vocab - 1];
  }
  float *d_logits = nullptr;
  engine::RowSampling *d_sampling = nullptr;
  int32_t *d_tokens = nullptr;
  void *workspace = nullptr;
  size_t workspace_bytes = samplingWorkspaceBytes(vocab);
  ASSERT_EQ(cudaMalloc(&d_logits, logits.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_sampling, rows * sizeof(engine::RowSampling)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_tokens, rows * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&workspace, workspace_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_logits, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  int mismatches = 0, draws = 0;
  for (uint64_t step = 0; step < 24; ++step) {
    std::vector<engine::RowSampling> sampling(rows);
    std::vector<engine::SamplingParams> params(rows);
    for (int32_t r = 0; r < rows; ++r) {
      params[r] = kinds[(r + step) % kinds.size()];
      params[r].seed = 1000 + r;
      sampling[r] = {params[r].temperature, params[r].top_k, params[r].top_p,
                     engine::samplingUniform(params[r].seed, step)};
    }
    ASSERT_EQ(cudaMemcpy(d_sampling, sampling.data(), rows * sizeof(engine::RowSampling),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(launchSampling(d_logits, rows, vocab, d_sampling, workspace, workspace_bytes,
                             d_tokens, nullptr),
              cudaSuccess);
    std::vector<int32_t> tokens(rows);
    ASSERT_EQ(cudaMemcpy(tokens.data(), d_tokens, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int32_t r = 0; r < rows; ++r, ++draws) {
      auto want = engine::sampleToken(logits.data() + static_cast<size_t>(r) * vocab, vocab,
                                      params[r], step);
      ASSERT_TRUE(want.isOk());
      if (tokens[r] != *want && ++mismatches <= 5)
        ADD_FAILURE() << "row " << r << " step " << step << " kind " << (r + step) % kinds.size()
                      << ": device " << tokens[r] << ", host " << *want;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << draws << " draws";

  // A NaN anywhere, or nothing but -inf: -1, as the host sampler fails.
  logits[5] = NAN;
  std::fill(logits.begin() + vocab, logits.begin() + 2 * vocab, -INFINITY);
  ASSERT_EQ(cudaMemcpy(d_logits, logits.data(), 2 * static_cast<size_t>(vocab) * 4,
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<engine::RowSampling> two = {{0.0f, 0, 1.0f, 0.5}, {1.0f, 10, 0.9f, 0.5}};
  ASSERT_EQ(
      cudaMemcpy(d_sampling, two.data(), 2 * sizeof(engine::RowSampling), cudaMemcpyHostToDevice),
      cudaSuccess);
  ASSERT_EQ(
      launchSampling(d_logits, 2, vocab, d_sampling, workspace, workspace_bytes, d_tokens, nullptr),
      cudaSuccess);
  int32_t bad[2] = {0, 0};
  ASSERT_EQ(cudaMemcpy(bad, d_tokens, 8, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(bad[0], -1) << "NaN row";
  EXPECT_EQ(bad[1], -1) << "all -inf row";
  for (void *p : {static_cast<void *>(d_logits), static_cast<void *>(d_sampling),
                  static_cast<void *>(d_tokens), workspace})
    cudaFree(p);
}

// Greedy rows on the device (launchArgmax): the maximum in any of the
// row's slices, ties to the lowest id across slice boundaries, a NaN in
// any slice or nothing but -inf giving -1; with one workspace over launches
// of 7, 4, 7, 1 and 7 rows (the first rows each time), so the per-row
// counters are seen to stay at zero and in place whatever the row count (a
// layout by the row count lost rows' tokens after a launch of more rows,
// device run 199).
TEST(SamplerTest, ArgmaxTakesTheLowestIdOfTheMaximum) {
  TXC_SKIP_WITHOUT_GPU();
  // 1001 and 50257 are not multiples of 4 (the scalar scan); the others are
  // scanned a float4 at a time; 128256 is Llama-3's.
  for (int64_t vocab : {64, 1000, 1001, 50257, 128256, 151936}) {
    SCOPED_TRACE("vocabulary " + std::to_string(vocab));
    const int64_t rows = 7;
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (float &v : logits)
      v = normal(rng);
    auto at = [&](int64_t r, int64_t c) -> float & {
      return logits[static_cast<size_t>(r * vocab + c)];
    };
    at(1, vocab - 1) = 100.0f;                                      // the last entry
    at(2, vocab / 2) = at(2, vocab / 3) = at(2, vocab - 2) = 50.0f; // ties in different slices
    at(3, 0) = at(3, vocab - 1) = 70.0f;
    at(4, vocab - 3) = NAN;
    for (int64_t c = 0; c < vocab; ++c)
      at(5, c) = -INFINITY;
    at(6, vocab / 7) = INFINITY;
    std::vector<int32_t> want(rows);
    for (int64_t r = 0; r < rows; ++r)
      want[r] = static_cast<int32_t>(
          std::max_element(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab) -
          (logits.begin() + r * vocab));
    want[2] = static_cast<int32_t>(vocab / 3);
    want[3] = 0;
    want[4] = want[5] = -1;
    float *d_logits = nullptr;
    int32_t *d_tokens = nullptr;
    void *workspace = nullptr;
    ASSERT_EQ(cudaMalloc(&d_logits, logits.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_tokens, rows * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&workspace, argmaxWorkspaceBytes(rows)), cudaSuccess);
    ASSERT_EQ(cudaMemset(workspace, 0, argmaxWorkspaceBytes(rows)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_logits, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    for (int64_t n : {rows, int64_t{4}, rows, int64_t{1}, rows}) {
      ASSERT_EQ(cudaMemset(d_tokens, 0x7f, rows * 4), cudaSuccess);
      ASSERT_EQ(launchArgmax(d_logits, n, vocab, workspace, d_tokens, nullptr), cudaSuccess);
      std::vector<int32_t> got(n);
      ASSERT_EQ(cudaMemcpy(got.data(), d_tokens, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + n)) << n << " rows";
    }
    for (void *p : {static_cast<void *>(d_logits), static_cast<void *>(d_tokens), workspace})
      cudaFree(p);
  }
}

TEST(SamplerTest, DrawsExactlyWhatTheHostSamplerDraws) {
  TXC_SKIP_WITHOUT_GPU();
  checkVocabulary(1000);
  checkVocabulary(151936); // Qwen3's vocabulary
}

} // namespace
} // namespace txc::cuda
