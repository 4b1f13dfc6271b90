//===- CublasGemmTest.cpp - cuBLASLt GEMMs, heuristic and tuned -----------===//
//
// The executor's cuBLASLt call against an fp64 reference on random bf16
// operands, with the heuristic's algorithm and with tuning (the fastest of
// its candidates, timed on the shape's first uncaptured call), for results
// in bf16 and f32, with and without the residual. Tuning must also leave a
// call made inside a stream capture working (it is timed later, uncaptured).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CublasGemm.h"
#include "runtime/backends/cpu/Tensor.h"

#include "GpuTest.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace txc::cuda {
namespace {

using cpu::bf16BitsToFloat;
using cpu::floatToBF16Bits;

struct Operands {
  int64_t m, n, k;
  std::vector<uint16_t> x, w, residual; // bf16
};

Operands makeOperands(int64_t m, int64_t n, int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operands o{m, n, k, {}, {}, {}};
  for (int64_t i = 0; i < m * k; ++i)
    o.x.push_back(floatToBF16Bits(u(rng)));
  for (int64_t i = 0; i < n * k; ++i)
    o.w.push_back(floatToBF16Bits(u(rng) / std::sqrt(static_cast<float>(k))));
  for (int64_t i = 0; i < m * n; ++i)
    o.residual.push_back(floatToBF16Bits(u(rng)));
  return o;
}

/// The exact result, and the product alone (what a rounding of x w^T before
/// the residual add would round).
struct Reference {
  std::vector<double> out, product;
};

Reference reference(const Operands &o, bool with_residual) {
  Reference ref{std::vector<double>(o.m * o.n), std::vector<double>(o.m * o.n)};
  for (int64_t r = 0; r < o.m; ++r)
    for (int64_t c = 0; c < o.n; ++c) {
      double acc = 0.0;
      for (int64_t i = 0; i < o.k; ++i)
        acc += static_cast<double>(bf16BitsToFloat(o.x[r * o.k + i])) *
               bf16BitsToFloat(o.w[c * o.k + i]);
      ref.product[r * o.n + c] = acc;
      ref.out[r * o.n + c] = acc + (with_residual ? bf16BitsToFloat(o.residual[r * o.n + c]) : 0.0);
    }
  return ref;
}

class CublasGemmTest : public ::testing::Test {
protected:
  void SetUp() override {
    TXC_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaMalloc(&workspace_, kCublasWorkspaceBytes), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (workspace_)
      cudaFree(workspace_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  /// Runs out = x w^T (+ residual) on `gemm`, the first call inside a
  /// stream capture when `first_captured`, and returns the result as floats.
  std::vector<float> run(CublasGemm &gemm, const Operands &o, bool with_residual, DType out_dtype,
                         bool first_captured) {
    const size_t out_elem = out_dtype == DType::kF32 ? 4 : 2;
    void *x = nullptr, *w = nullptr, *out = nullptr;
    EXPECT_EQ(cudaMalloc(&x, o.x.size() * 2), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&w, o.w.size() * 2), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&out, o.m * o.n * out_elem), cudaSuccess);
    cudaMemcpy(x, o.x.data(), o.x.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(w, o.w.data(), o.w.size() * 2, cudaMemcpyHostToDevice);
    auto loadResidual = [&] { // in place: the residual is the result buffer
      if (out_dtype == DType::kF32) {
        std::vector<float> r(o.residual.size());
        for (size_t i = 0; i < r.size(); ++i)
          r[i] = bf16BitsToFloat(o.residual[i]);
        cudaMemcpy(out, r.data(), r.size() * 4, cudaMemcpyHostToDevice);
      } else {
        cudaMemcpy(out, o.residual.data(), o.residual.size() * 2, cudaMemcpyHostToDevice);
      }
    };
    auto call = [&] {
      const GemmOperand residual = with_residual ? GemmOperand{out, out_dtype} : GemmOperand{};
      return gemm.run(o.m, o.n, o.k, {x, DType::kBF16}, {w, DType::kBF16}, {}, residual, out,
                      out_dtype, stream_);
    };
    if (first_captured) {
      if (with_residual)
        loadResidual();
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      Status captured = call();
      EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
      EXPECT_TRUE(captured.isOk()) << captured.message();
      EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    if (with_residual)
      loadResidual();
    Status status = call(); // uncaptured: where tuning times the candidates
    EXPECT_TRUE(status.isOk()) << status.message();
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> result(o.m * o.n);
    if (out_dtype == DType::kF32) {
      cudaMemcpy(result.data(), out, result.size() * 4, cudaMemcpyDeviceToHost);
    } else {
      std::vector<uint16_t> bf(result.size());
      cudaMemcpy(bf.data(), out, bf.size() * 2, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < bf.size(); ++i)
        result[i] = bf16BitsToFloat(bf[i]);
    }
    cudaFree(x);
    cudaFree(w);
    cudaFree(out);
    return result;
  }

  void *workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

void expectClose(const std::vector<float> &got, const Reference &want, DType out_dtype,
                 const std::string &what) {
  // f32 results: the accumulation order alone (relative 1e-4). bf16 results:
  // half an ulp (2^-8 relative) of the result, plus half an ulp of the
  // product where a residual is added: device run 46 found every one of the
  // heuristic's 8 algorithms at 16 x 256 x 1024 (none splits K) off by the
  // same 0.0227 of |result| + 0.05, which one rounding of the result cannot
  // give and a rounding of the product before the add can. Plus fp32
  // accumulation.
  size_t worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i;
    const double out = want.out[i], product = want.product[i];
    const double bound = out_dtype == DType::kF32
                             ? 1e-4 * (std::abs(out) + 0.05)
                             : std::ldexp(std::abs(out) + std::abs(product), -8) * 1.01 + 1e-4;
    const double excess = std::abs(got[i] - out) / bound;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 1.0) << what << ": element " << worst << " is " << got[worst]
                               << ", the reference " << want.out[worst] << " (product "
                               << want.product[worst] << ")";
}

TEST_F(CublasGemmTest, HeuristicAndTunedAlgorithmsMatchTheReference) {
  struct Case {
    int64_t m, n, k;
    bool residual;
    DType out;
  };
  for (const Case &c :
       {Case{8, 512, 1024, false, DType::kBF16}, Case{32, 384, 2048, true, DType::kBF16},
        Case{64, 640, 512, false, DType::kF32}}) {
    const std::string what = "m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " +
                             std::to_string(c.k) + (c.residual ? " +residual" : "") +
                             (c.out == DType::kF32 ? " f32" : " bf16");
    const Operands o = makeOperands(c.m, c.n, c.k, static_cast<unsigned>(c.m * 31 + c.n));
    const Reference want = reference(o, c.residual);
    for (bool tuning : {false, true}) {
      CublasGemm gemm;
      ASSERT_TRUE(gemm.init(workspace_, kCublasWorkspaceBytes).isOk());
      gemm.setTuning(tuning);
      expectClose(run(gemm, o, c.residual, c.out, /*first_captured=*/false), want, c.out,
                  what + (tuning ? " tuned" : " heuristic"));
    }
  }
}

TEST_F(CublasGemmTest, TuningWaitsForACallOutsideACapture) {
  const Operands o = makeOperands(16, 256, 1024, 7u);
  const Reference want = reference(o, true);
  CublasGemm gemm;
  ASSERT_TRUE(gemm.init(workspace_, kCublasWorkspaceBytes).isOk());
  gemm.setTuning(true);
  expectClose(run(gemm, o, true, DType::kBF16, /*first_captured=*/true), want, DType::kBF16,
              "captured first, then tuned");
}

} // namespace
} // namespace txc::cuda
