//===- RopeFactorsTest.cpp - a decode step's rotary factors ---------------===//
//
// launchRopeFactors writes, for every token of a step, the (cos, sin) pairs
// the decode attention's folded rope rotates by. They must be what the rope
// kernel (RopeAppend.cuh, kernels::ropeCosSin) computes at the same position:
// the angle rounded to fp32, its cos and sin in double rounded once, times
// the attention scaling. Checked against the same arithmetic on the host
// (the host's and the device's double cos may differ in their last bit, so
// within one fp32 ulp), on random positions with the output poisoned first.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "runtime/backends/cuda/CudaKernels.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

TEST(RopeFactorsTest, MatchesTheRopeKernelsArithmeticAtRandomPositions) {
  TXC_SKIP_WITHOUT_GPU();
  for (float scaling : {1.0f, 0.8f}) {
    SCOPED_TRACE("attention scaling " + std::to_string(scaling));
    constexpr int64_t kRows = 37, kHalf = 64;
    std::mt19937 rng(7);
    std::vector<int32_t> positions(kRows);
    for (int32_t &p : positions)
      p = std::uniform_int_distribution<int32_t>(0, 131071)(rng);
    positions[0] = 0;
    std::vector<float> inv_freq(kHalf);
    for (int64_t i = 0; i < kHalf; ++i)
      inv_freq[i] = static_cast<float>(1.0 / std::pow(1e6, static_cast<double>(2 * i) / (2 * kHalf)));
    std::vector<float> out(kRows * kHalf * 2, std::numeric_limits<float>::quiet_NaN());

    int32_t *d_positions = nullptr;
    float *d_inv_freq = nullptr, *d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_positions, kRows * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_inv_freq, kHalf * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, out.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_positions, positions.data(), kRows * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_inv_freq, inv_freq.data(), kHalf * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_out, out.data(), out.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(launchRopeFactors(d_positions, kRows, d_inv_freq, kHalf, scaling, d_out, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_positions);
    cudaFree(d_inv_freq);
    cudaFree(d_out);

    int bad = 0;
    for (int64_t t = 0; t < kRows; ++t) {
      for (int64_t i = 0; i < kHalf; ++i) {
        const float angle = inv_freq[i] * static_cast<float>(positions[t]);
        const float want[2] = {static_cast<float>(std::cos(static_cast<double>(angle))) * scaling,
                               static_cast<float>(std::sin(static_cast<double>(angle))) * scaling};
        for (int k = 0; k < 2; ++k) {
          const float got = out[2 * (t * kHalf + i) + k];
          const float ulp = std::nextafter(std::fabs(want[k]), INFINITY) - std::fabs(want[k]);
          if (!(std::fabs(got - want[k]) <= ulp) && bad++ < 5)
            ADD_FAILURE() << (k == 0 ? "cos" : "sin") << " of pair " << i << " at position "
                          << positions[t] << ": " << got << ", expected " << want[k];
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(RopeFactorsTest, AnEmptyStepLaunchesNothingAndNegativeSizesAreRefused) {
  TXC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(launchRopeFactors(nullptr, 0, nullptr, 64, 1.0f, nullptr, nullptr), cudaSuccess);
  EXPECT_EQ(launchRopeFactors(nullptr, -1, nullptr, 64, 1.0f, nullptr, nullptr), cudaErrorInvalidValue);
}

} // namespace
} // namespace txc::cuda
