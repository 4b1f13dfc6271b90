//===- RopeFactorsTest.cpp - a decode step's rotary factors ---------------===//
//
// The embedding kernel (launchEmbedding), a decode step's first kernel,
// also writes for every token the (cos, sin) pairs the decode attention's
// folded rope rotates by, one set per distinct rotary table
// (StepRopeFactors). They must be what the rope kernel (RopeAppend.cuh,
// kernels::ropeCosSin) computes at the same position: the angle rounded to
// fp32, its cos and sin in double rounded once, times the attention
// scaling. Checked against the same arithmetic on the host (the host's and
// the device's double cos may differ in their last bit, so within one fp32
// ulp), on random positions with the output poisoned first, two sets in one
// launch; the embedding rows beside them must stay exact.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "runtime/backends/cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

template <typename T> T *upload(const std::vector<T> &host) {
  T *device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return device;
}

template <typename T> std::vector<T> download(const T *device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(RopeFactorsTest, TheEmbeddingKernelComputesEverySetAtRandomPositions) {
  TXC_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 37, kVocab = 50, kCols = 40;
  constexpr int kSets = 2;
  const int64_t halves[kSets] = {64, 16};
  const float scalings[kSets] = {1.0f, 0.8f};
  const double thetas[kSets] = {1e6, 1e4};
  std::mt19937 rng(7);
  std::vector<int32_t> positions(kRows), tokens(kRows);
  for (int64_t t = 0; t < kRows; ++t) {
    positions[t] = std::uniform_int_distribution<int32_t>(0, 131071)(rng);
    tokens[t] = std::uniform_int_distribution<int32_t>(0, kVocab + 2)(rng); // some past the table
  }
  positions[0] = 0;
  std::vector<float> table(kVocab * kCols);
  for (float &v : table)
    v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);

  int32_t *d_positions = upload(positions), *d_tokens = upload(tokens);
  float *d_table = upload(table);
  float *d_rows = upload(std::vector<float>(kRows * kCols, std::numeric_limits<float>::quiet_NaN()));
  std::vector<std::vector<float>> inv_freq(kSets);
  StepRopeFactors factors;
  factors.positions = d_positions;
  factors.sets = kSets;
  for (int s = 0; s < kSets; ++s) {
    for (int64_t i = 0; i < halves[s]; ++i)
      inv_freq[s].push_back(
          static_cast<float>(1.0 / std::pow(thetas[s], static_cast<double>(2 * i) / (2 * halves[s]))));
    factors.inv_freq[s] = upload(inv_freq[s]);
    factors.half[s] = static_cast<int>(halves[s]);
    factors.attention_scaling[s] = scalings[s];
    factors.out[s] = upload(std::vector<float>(kRows * halves[s] * 2, std::numeric_limits<float>::quiet_NaN()));
  }
  ASSERT_EQ(launchEmbedding(d_tokens, kRows, d_table, EType::kF32, kVocab, kCols, 0, d_rows, EType::kF32,
                            factors, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> rows = download(d_rows, kRows * kCols);
  for (int64_t t = 0; t < kRows; ++t)
    for (int64_t c = 0; c < kCols; ++c)
      ASSERT_EQ(rows[t * kCols + c], tokens[t] < kVocab ? table[tokens[t] * kCols + c] : 0.0f)
          << "embedding row " << t << " (token " << tokens[t] << "), column " << c;
  int bad = 0;
  for (int s = 0; s < kSets; ++s) {
    const std::vector<float> out = download(factors.out[s], kRows * halves[s] * 2);
    for (int64_t t = 0; t < kRows; ++t)
      for (int64_t i = 0; i < halves[s]; ++i) {
        const float angle = inv_freq[s][i] * static_cast<float>(positions[t]);
        const float want[2] = {static_cast<float>(std::cos(static_cast<double>(angle))) * scalings[s],
                               static_cast<float>(std::sin(static_cast<double>(angle))) * scalings[s]};
        for (int k = 0; k < 2; ++k) {
          const float got = out[2 * (t * halves[s] + i) + k];
          const float ulp = std::nextafter(std::fabs(want[k]), INFINITY) - std::fabs(want[k]);
          if (!(std::fabs(got - want[k]) <= ulp) && bad++ < 5)
            ADD_FAILURE() << "set " << s << ": " << (k == 0 ? "cos" : "sin") << " of pair " << i
                          << " at position " << positions[t] << ": " << got << ", expected " << want[k];
        }
      }
    cudaFree(const_cast<float *>(factors.inv_freq[s]));
    cudaFree(factors.out[s]);
  }
  EXPECT_EQ(bad, 0);
  for (void *p : {static_cast<void *>(d_positions), static_cast<void *>(d_tokens), static_cast<void *>(d_table),
                  static_cast<void *>(d_rows)})
    cudaFree(p);
}

// 16-bit tables whose rows are whole 16-byte chunks are read a chunk at a
// time (all of a thread's at once) and copied, or widened to fp32; others
// element by element. Every row exact, zeros for tokens outside the table
// (a vocab_start shard), the output poisoned first.
template <typename T> void checkEmbeddingRows(EType type, EType out_type, int64_t cols) {
  SCOPED_TRACE("cols " + std::to_string(cols) + (out_type == EType::kF32 ? ", widened" : ", copied"));
  constexpr int64_t kRows = 9, kVocab = 20, kStart = 3;
  std::mt19937 rng(static_cast<uint32_t>(cols));
  std::vector<int32_t> tokens(kRows);
  for (int32_t &token : tokens)
    token = std::uniform_int_distribution<int32_t>(0, kStart + kVocab + 2)(rng); // some outside
  std::vector<T> table(kVocab * cols);
  for (T &v : table)
    v = static_cast<T>(std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng));
  int32_t *d_tokens = upload(tokens);
  T *d_table = upload(table);
  const size_t out_bytes = kRows * cols * (out_type == EType::kF32 ? 4 : 2);
  void *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_out, out_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_out, 0x7f, out_bytes), cudaSuccess);
  ASSERT_EQ(launchEmbedding(d_tokens, kRows, d_table, type, kVocab, cols, kStart, d_out, out_type,
                            StepRopeFactors{}, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(kRows * cols);
  if (out_type == EType::kF32) {
    got = download(static_cast<float *>(d_out), kRows * cols);
  } else {
    const std::vector<T> raw = download(static_cast<T *>(d_out), kRows * cols);
    for (size_t i = 0; i < raw.size(); ++i)
      got[i] = static_cast<float>(raw[i]);
  }
  for (int64_t t = 0; t < kRows; ++t) {
    const int64_t row = tokens[t] - kStart;
    for (int64_t c = 0; c < cols; ++c) {
      const float want = row >= 0 && row < kVocab ? static_cast<float>(table[row * cols + c]) : 0.0f;
      ASSERT_EQ(got[t * cols + c], want) << "row " << t << " (token " << tokens[t] << "), column " << c;
    }
  }
  for (void *p : {static_cast<void *>(d_tokens), static_cast<void *>(d_table), d_out})
    cudaFree(p);
}

TEST(RopeFactorsTest, SixteenBitEmbeddingRowsAreCopiedOrWidenedExactly) {
  TXC_SKIP_WITHOUT_GPU();
  // 1024: one chunk a thread; 2400: 300 chunks, two for some threads; 44:
  // not whole chunks (the element loop).
  for (int64_t cols : {1024, 2400, 44}) {
    checkEmbeddingRows<__nv_bfloat16>(EType::kBF16, EType::kBF16, cols);
    checkEmbeddingRows<__nv_bfloat16>(EType::kBF16, EType::kF32, cols);
    checkEmbeddingRows<__half>(EType::kF16, EType::kF16, cols);
    checkEmbeddingRows<__half>(EType::kF16, EType::kF32, cols);
  }
}

TEST(RopeFactorsTest, AnEmptyStepLaunchesNothingAndBadSizesAreRefused) {
  TXC_SKIP_WITHOUT_GPU();
  StepRopeFactors none;
  EXPECT_EQ(launchEmbedding(nullptr, 0, nullptr, EType::kF32, 1, 1, 0, nullptr, EType::kF32, none, nullptr),
            cudaSuccess);
  EXPECT_EQ(launchEmbedding(nullptr, -1, nullptr, EType::kF32, 1, 1, 0, nullptr, EType::kF32, none, nullptr),
            cudaErrorInvalidValue);
  StepRopeFactors too_many;
  too_many.sets = kMaxStepFactorSets + 1;
  EXPECT_EQ(launchEmbedding(nullptr, 0, nullptr, EType::kF32, 1, 1, 0, nullptr, EType::kF32, too_many, nullptr),
            cudaErrorInvalidValue);
}

} // namespace
} // namespace txc::cuda
