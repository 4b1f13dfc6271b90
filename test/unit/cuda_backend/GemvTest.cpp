//===- GemvTest.cpp - The decode GEMV against an fp64 reference ------------===//
//
// Fresh random inputs, the output poisoned with NaN first, every epilogue,
// odd sizes (n odd, k not a multiple of the unrolled chunk), K split over
// 1 to 8 warps, in-place residual, bf16 and f16, fp32 logits out.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"
#include "TestTensors.h"

#include "runtime/backends/cuda/DecodeGemm.h"
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/SkinnyGemm.h"
#include "runtime/backends/cuda/StagedGemv.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace txc::cuda {
namespace {

using cpu::testing::poisonedTensor;
using cpu::testing::randomTensor;
using cpu::testing::TestTensor;
using cpu::testing::toleranceFor;

struct GemvCase {
  DType dtype;
  DType out_dtype;
  int64_t m, n, k;
  GemvEpilogue epilogue;
  bool bias;
  bool residual_in_place;
  bool norm = false;                  // RMSNorm prologue
  bool skinny = false;                // SkinnyGemm.cu instead of the GEMV
  bool decode = false;                // DecodeGemm.cu instead of the GEMV
  const GemvConfig *config = nullptr; // launchGemvWithConfig instead of launchGemv
  bool norm_weight_folded = false;    // with norm: no norm weight (the compiler folded it into w)
  bool staged = false;                // StagedGemv.cu instead of the GEMV
};

void *upload(const TestTensor &t) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(t.bytes.size(), 16)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

EType etypeOf(DType dtype) { return dtype == DType::kBF16 ? EType::kBF16 : EType::kF16; }

void runCase(const GemvCase &c) {
  SCOPED_TRACE(std::string(c.decode   ? "decode "
                           : c.skinny ? "skinny "
                           : c.staged ? "staged "
                                      : "gemv ") +
               "m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " +
               std::to_string(c.k) + " epilogue " + std::to_string(static_cast<int>(c.epilogue)) +
               (c.config ? " config " + std::to_string(c.config->warps_per_block) + "/" +
                               std::to_string(c.config->unroll) + "/" +
                               std::to_string(c.config->target_warps_per_sm)
                         : std::string()));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 1000003 + c.n * 101 + c.k));
  TestTensor x = randomTensor(c.dtype, c.m, c.k, rng);
  TestTensor w = randomTensor(c.dtype, c.n, c.k, rng, -0.1, 0.1);
  TestTensor bias = randomTensor(DType::kF32, 1, c.n, rng);
  TestTensor gamma = randomTensor(c.dtype, 1, c.k, rng, 0.5, 1.5);
  const double eps = 1e-6;
  int64_t out_cols = c.epilogue == GemvEpilogue::kSwiglu ? c.n / 2 : c.n;
  TestTensor residual = randomTensor(c.out_dtype, c.m, out_cols, rng);
  TestTensor out = c.residual_in_place ? residual : poisonedTensor(c.out_dtype, c.m, out_cols);

  void *dx = upload(x), *dw = upload(w), *db = upload(bias), *dr = upload(residual);
  void *dg = upload(gamma);
  void *dout = c.residual_in_place ? dr : upload(out);
  GemvArgs args;
  args.x = dx;
  args.w = dw;
  args.bias = c.bias ? db : nullptr;
  args.bias_type = EType::kF32;
  args.residual = c.epilogue == GemvEpilogue::kResidualAdd ? dr : nullptr;
  args.out = dout;
  args.type = etypeOf(c.dtype);
  args.out_type = c.out_dtype == DType::kF32 ? EType::kF32 : etypeOf(c.dtype);
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.epilogue = c.epilogue;
  args.pdl = c.m % 2 == 1; // alone on the stream, PDL must change nothing
  if (c.norm) {
    args.norm = true;
    args.norm_weight = c.norm_weight_folded ? nullptr : dg;
    args.norm_type = etypeOf(c.dtype);
    args.norm_eps = static_cast<float>(eps);
  }
  if (c.decode) {
    // Twice: the shared tiles' counters must be left at zero for the next
    // launch.
    DecodeGemmWorkspace ws;
    ws.partial_floats = int64_t{1} << 20;
    ws.num_counters = 1024;
    ASSERT_EQ(cudaMalloc(&ws.partials, ws.partial_floats * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ws.counters, ws.num_counters * sizeof(unsigned)), cudaSuccess);
    ASSERT_EQ(cudaMemset(ws.counters, 0, ws.num_counters * sizeof(unsigned)), cudaSuccess);
    ASSERT_TRUE(decodeGemmSupports(args));
    ASSERT_EQ(prepareDecodeGemm(), cudaSuccess);
    if (!c.residual_in_place)
      ASSERT_EQ(launchDecodeGemm(args, ws, nullptr), cudaSuccess);
    ASSERT_EQ(launchDecodeGemm(args, ws, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<unsigned> counters(ws.num_counters);
    ASSERT_EQ(cudaMemcpy(counters.data(), ws.counters, counters.size() * sizeof(unsigned),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::count(counters.begin(), counters.end(), 0u), ws.num_counters);
    cudaFree(ws.partials);
    cudaFree(ws.counters);
  } else if (c.staged) {
    ASSERT_TRUE(stagedGemvSupports(args, c.n * c.k * 2));
    // Twice where the output is not the residual: a launch leaves nothing
    // behind that changes the next.
    if (!c.residual_in_place)
      ASSERT_EQ(launchStagedGemv(args, nullptr), cudaSuccess);
    ASSERT_EQ(launchStagedGemv(args, nullptr), cudaSuccess);
  } else if (c.skinny) {
    ASSERT_TRUE(skinnyGemmSupports(args));
    ASSERT_EQ(launchSkinnyGemm(args, nullptr), cudaSuccess);
  } else {
    ASSERT_TRUE(gemvSupports(args));
    ASSERT_EQ(c.config ? launchGemvWithConfig(args, *c.config, nullptr) : launchGemv(args, nullptr),
              cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.bytes.data(), dout, out.bytes.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (void *p : {dx, dw, db, dr, dg})
    cudaFree(p);
  if (!c.residual_in_place)
    cudaFree(dout);

  // With the norm the kernel computes inv_rms(x) * (w . round(x * gamma)):
  // the norm's weight applied elementwise and rounded to the activation
  // type, the row's inverse RMS (a scalar) applied to the finished dot. The
  // executor test checks this against the separate rms_norm launch. With
  // the weight folded into w, inv_rms(x) * (w . x).
  TestTensor input = x;
  std::vector<double> inv_rms(c.m, 1.0);
  if (c.norm)
    for (int64_t r = 0; r < c.m; ++r) {
      double squares = 0.0;
      for (int64_t i = 0; i < c.k; ++i) {
        squares += x.at(r, i) * x.at(r, i);
        if (!c.norm_weight_folded)
          input.set(r, i, x.at(r, i) * gamma.at(0, i));
      }
      inv_rms[r] = 1.0 / std::sqrt(squares / c.k + eps);
    }
  auto dot = [&](int64_t r, int64_t j) {
    double sum = 0.0;
    for (int64_t i = 0; i < c.k; ++i)
      sum += input.at(r, i) * w.at(j, i);
    return sum * inv_rms[r] + (c.bias ? bias.at(0, j) : 0.0);
  };
  int bad = 0;
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t j = 0; j < out_cols; ++j) {
      double want = 0.0;
      if (c.epilogue == GemvEpilogue::kSwiglu) {
        double g = dot(r, j), u = dot(r, j + c.n / 2);
        want = g / (1.0 + std::exp(-g)) * u;
      } else {
        want = dot(r, j);
        if (c.epilogue == GemvEpilogue::kResidualAdd)
          want += residual.at(r, j);
      }
      double got = out.at(r, j);
      if (!(std::abs(got - want) <= toleranceFor(c.out_dtype, std::abs(want))) && ++bad <= 5)
        ADD_FAILURE() << "row " << r << " col " << j << ": got " << got << ", want " << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(GemvTest, MatchesTheReferenceForEveryEpilogue) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, h = DType::kF16, f = DType::kF32;
  const GemvCase cases[] = {
      {bf, bf, 1, 37, 64, GemvEpilogue::kNone, false, false},
      {bf, bf, 1, 1024, 1024, GemvEpilogue::kNone, false, false},
      {bf, f, 1, 4099, 1024, GemvEpilogue::kNone, false, false}, // logits
      {bf, f, 4, 515, 264, GemvEpilogue::kNone, true, false},
      {bf, bf, 3, 64, 1000, GemvEpilogue::kResidualAdd, true, false},
      {bf, bf, 2, 130, 2056, GemvEpilogue::kResidualAdd, false, true},
      {bf, bf, 2, 129, 520, GemvEpilogue::kResidualAdd, true, false}, // odd n: the last pair is one row
      {bf, f, 1, 64, 256, GemvEpilogue::kResidualAdd, false, false},  // f32 out with a residual
      {bf, bf, 4, 96, 4096, GemvEpilogue::kSwiglu, true, false},
      {bf, bf, 3, 154, 136, GemvEpilogue::kSwiglu, false, false},
      {h, h, 4, 33, 520, GemvEpilogue::kNone, true, false},
      {h, h, 3, 64, 256, GemvEpilogue::kSwiglu, false, false},
      {h, h, 1, 300, 8, GemvEpilogue::kResidualAdd, false, true},
      {h, f, 2, 77, 128, GemvEpilogue::kNone, false, false},
      {bf, bf, 1, 256, 1024, GemvEpilogue::kNone, false, false, true},
      {bf, bf, 4, 96, 2048, GemvEpilogue::kSwiglu, false, false, true},
      {bf, f, 2, 300, 512, GemvEpilogue::kNone, false, false, true},
      {h, h, 4, 64, 264, GemvEpilogue::kResidualAdd, true, true, true},
  };
  for (const GemvCase &c : cases)
    runCase(c);
  // The norm's weight folded into w by the compiler: only the squares of x.
  const GemvCase folded[] = {
      {bf, bf, 1, 4096, 1024, GemvEpilogue::kNone, false, false, true},
      {bf, bf, 1, 6144, 1024, GemvEpilogue::kSwiglu, false, false, true},
      {bf, f, 2, 515, 264, GemvEpilogue::kNone, true, false, true},
      {h, h, 3, 130, 2056, GemvEpilogue::kResidualAdd, false, true, true},
  };
  for (GemvCase c : folded) {
    c.norm_weight_folded = true;
    runCase(c);
  }
}

// Every configuration decode_ops_bench sweeps (and gemvConfigFor picks):
// warps per block, chunks in flight, K slices; rows not a multiple of the
// block's pairs, K not a multiple of the unrolled chunk, each epilogue, with
// the norm's weight and with it folded into w.
TEST(GemvTest, EveryConfigurationMatchesTheReference) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, f = DType::kF32;
  std::vector<GemvConfig> configs;
  for (int warps : {4, 8})
    for (int unroll : {2, 4, 8})
      for (int target : {16, 64}) {
        GemvConfig c;
        c.warps_per_block = warps;
        c.unroll = unroll;
        c.target_warps_per_sm = target;
        configs.push_back(c);
      }
  for (const GemvConfig &config : configs) {
    GemvCase cases[] = {
        {bf, bf, 1, 6150, 1032, GemvEpilogue::kNone, true, false, true},
        {bf, bf, 1, 258, 4096, GemvEpilogue::kResidualAdd, false, true},
        {bf, bf, 1, 1032, 2048, GemvEpilogue::kSwiglu, false, false, true},
        {bf, f, 1, 4099, 256, GemvEpilogue::kNone, false, false},
        // The decode step's form: the norm's weight folded into w, so the
        // kernel batches its input loads (gemvInputsBatched), and a residual.
        {bf, bf, 1, 1030, 1544, GemvEpilogue::kResidualAdd, false, false, true},
    };
    cases[4].norm_weight_folded = true;
    for (GemvCase c : cases) {
      c.config = &config;
      runCase(c);
    }
  }
}

TEST(GemvTest, ConfigurationFollowsTheShape) {
  struct Expected {
    int64_t n, k;
    int warps, unroll, target;
  };
  for (const Expected &e : {Expected{4096, 1024, 4, 4, 1},    // Qwen3-0.6B qkv: K unsplit
                            Expected{1024, 2048, 4, 4, 16},   // its o_proj: K in 4 slices
                            Expected{2048, 2048, 4, 4, 16},
                            Expected{1024, 1024, 4, 4, 16},
                            Expected{1024, 3072, 4, 4, 16},   // its down
                            Expected{6144, 1024, 4, 4, 16},   // its gate/up
                            Expected{4096, 4096, 8, 2, 16},   // Llama-3-8B o_proj
                            Expected{6144, 4096, 4, 4, 64},   // its qkv
                            Expected{28672, 4096, 4, 4, 64},  // its gate/up
                            Expected{4096, 14336, 8, 2, 16},  // its down
                            Expected{128256, 4096, 4, 2, 16}}) { // its lm_head
    const GemvConfig c = gemvConfigFor(e.n, e.k);
    EXPECT_EQ(c.warps_per_block, e.warps) << e.n << " x " << e.k;
    EXPECT_EQ(c.unroll, e.unroll) << e.n << " x " << e.k;
    EXPECT_EQ(c.target_warps_per_sm, e.target) << e.n << " x " << e.k;
    EXPECT_TRUE(gemvConfigSupported(c)) << e.n << " x " << e.k;
  }
  EXPECT_FALSE(gemvConfigSupported({3, 2, 16}));
  EXPECT_FALSE(gemvConfigSupported({4, 3, 16}));
  EXPECT_FALSE(gemvConfigSupported({4, 2, 2000}));
}

// The tensor-core skinny GEMM: 3-8 rows, weight rows not a multiple of 16,
// one to eight K slices, each epilogue.
// Tiles of 16 rows (8 gate/up pairs for SwiGLU), the last one part-empty,
// k from 256 to 3072 (one to twelve 16-wide steps a chain), every epilogue,
// the norm with its weight and folded, bias, in-place residual, bf16 and f16.
TEST(StagedGemvTest, MatchesTheReferenceForEveryEpilogue) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, h = DType::kF16;
  GemvCase cases[] = {
      {bf, bf, 1, 37, 256, GemvEpilogue::kNone, false, false},
      {bf, bf, 1, 4096, 1024, GemvEpilogue::kNone, false, false, true},     // Qwen3's QKV
      {bf, bf, 1, 1024, 2048, GemvEpilogue::kResidualAdd, false, true},     // o_proj, in place
      {bf, bf, 1, 6144, 1024, GemvEpilogue::kSwiglu, false, false, true},   // gate/up
      {bf, bf, 1, 1024, 3072, GemvEpilogue::kResidualAdd, true, false},     // down
      {bf, bf, 1, 3077, 512, GemvEpilogue::kNone, true, false},             // odd n
      {bf, bf, 1, 130, 768, GemvEpilogue::kSwiglu, true, false, true},
      {h, h, 1, 515, 256, GemvEpilogue::kResidualAdd, true, false, true},
      {h, h, 1, 3100, 256, GemvEpilogue::kSwiglu, false, false},
  };
  for (GemvCase &c : cases) {
    c.staged = true;
    runCase(c);
  }
  GemvCase folded = {bf, bf, 1, 4096, 1024, GemvEpilogue::kNone, false, false, true};
  folded.staged = true;
  folded.norm_weight_folded = true;
  runCase(folded);
}

TEST(StagedGemvTest, RefusesWhatItDoesNotTake) {
  GemvArgs a;
  alignas(16) static char buffer[16];
  a.x = a.w = a.out = buffer;
  a.m = 1;
  a.n = 1024;
  a.k = 1024;
  EXPECT_TRUE(stagedGemvSupports(a, a.n * a.k * 2));
  EXPECT_FALSE(stagedGemvSupports(a, a.n * a.k * 2 - 1)); // over the budget
  GemvArgs two_rows = a;
  two_rows.m = 2;
  EXPECT_FALSE(stagedGemvSupports(two_rows, int64_t{1} << 30));
  GemvArgs short_k = a;
  short_k.k = 1000; // not a multiple of 256
  EXPECT_FALSE(stagedGemvSupports(short_k, int64_t{1} << 30));
  GemvArgs logits = a;
  logits.out_type = EType::kF32;
  EXPECT_FALSE(stagedGemvSupports(logits, int64_t{1} << 30));
  GemvArgs long_rows = a;
  long_rows.k = 4096; // a tile of 16 rows of 8 KB: over a block's shared memory
  EXPECT_FALSE(stagedGemvSupports(long_rows, int64_t{1} << 30));
}

TEST(SkinnyGemmTest, MatchesTheReferenceForEveryEpilogue) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, h = DType::kF16, f = DType::kF32;
  const GemvCase cases[] = {
      {bf, bf, 3, 37, 64, GemvEpilogue::kNone, false, false},
      {bf, bf, 8, 1024, 1024, GemvEpilogue::kNone, true, false},
      {bf, f, 5, 4099, 1024, GemvEpilogue::kNone, false, false}, // logits
      {bf, bf, 6, 64, 4096, GemvEpilogue::kResidualAdd, true, false},
      {bf, bf, 7, 130, 2048, GemvEpilogue::kResidualAdd, false, true},
      {bf, bf, 8, 96, 4096, GemvEpilogue::kSwiglu, true, false},
      {bf, bf, 4, 2048, 1024, GemvEpilogue::kSwiglu, false, false},
      {bf, bf, 8, 256, 14336, GemvEpilogue::kResidualAdd, false, true},
      {bf, bf, 5, 48, 96, GemvEpilogue::kNone, false, false},
      {h, h, 4, 33, 512, GemvEpilogue::kNone, true, false},
      {h, h, 7, 64, 256, GemvEpilogue::kSwiglu, false, false},
      {h, f, 8, 77, 128, GemvEpilogue::kNone, false, false},
  };
  for (GemvCase c : cases) {
    c.skinny = true;
    runCase(c);
  }
}

// The wgmma decode GEMM: batches of 1-64 rows (one and two N tiles),
// weight rows past the last tile, K from one chunk to 14336 (tiles whole in
// one CTA and shared by up to 56), CTAs whose range runs through several
// tiles (whole, or cut at both ends), each epilogue, both 16-bit types, the
// logits in f32.
TEST(DecodeGemmTest, MatchesTheReferenceForEveryEpilogue) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, h = DType::kF16, f = DType::kF32;
  const GemvCase cases[] = {
      {bf, bf, 32, 4096, 4096, GemvEpilogue::kResidualAdd, false, true},  // o_proj
      {bf, bf, 32, 256, 14336, GemvEpilogue::kResidualAdd, false, false}, // 56 parts a tile
      {bf, bf, 32, 1024, 4096, GemvEpilogue::kSwiglu, false, false},
      {bf, bf, 17, 200, 512, GemvEpilogue::kNone, true, false}, // rows past the tile
      {bf, bf, 64, 384, 1024, GemvEpilogue::kNone, false, false},
      {bf, bf, 40, 128, 2048, GemvEpilogue::kSwiglu, true, false},
      {bf, f, 9, 4099, 1024, GemvEpilogue::kNone, false, false}, // logits
      {bf, bf, 1, 64, 64, GemvEpilogue::kNone, false, false},
      {h, h, 33, 192, 768, GemvEpilogue::kResidualAdd, true, true},
      {h, h, 12, 128, 256, GemvEpilogue::kSwiglu, false, false},
      // 64 CTAs of two whole tiles each (128 tiles of 2 chunks).
      {bf, bf, 32, 8192, 128, GemvEpilogue::kNone, false, false},
      {bf, bf, 24, 4096, 128, GemvEpilogue::kSwiglu, true, false},
      // 48 CTAs of 4 steps over tiles of 3 chunks: cut mid-tile at both ends.
      {bf, bf, 32, 4096, 192, GemvEpilogue::kResidualAdd, false, true},
  };
  for (GemvCase c : cases) {
    c.decode = true;
    runCase(c);
  }
}

TEST(DecodeGemmTest, RefusesWhatItDoesNotTake) {
  GemvArgs args;
  args.x = args.w = reinterpret_cast<void *>(256);
  args.m = 32;
  args.n = 64;
  args.k = 128;
  EXPECT_TRUE(decodeGemmSupports(args));
  args.k = 96; // not a multiple of 64
  EXPECT_FALSE(decodeGemmSupports(args));
  args.k = 128;
  args.m = kDecodeGemmMaxRows + 1;
  EXPECT_FALSE(decodeGemmSupports(args));
  args.m = 32;
  args.epilogue = GemvEpilogue::kSwiglu;
  args.n = 96; // n / 2 not a multiple of 32
  EXPECT_FALSE(decodeGemmSupports(args));
  args.n = 128;
  EXPECT_TRUE(decodeGemmSupports(args));
  args.epilogue = GemvEpilogue::kNone;
  args.norm = true; // the fused norm is the GEMV's
  EXPECT_FALSE(decodeGemmSupports(args));
}

TEST(SkinnyGemmTest, RefusesWhatItDoesNotTake) {
  GemvArgs args;
  args.x = args.w = reinterpret_cast<void *>(256);
  args.m = 8;
  args.n = 64;
  args.k = 64;
  EXPECT_TRUE(skinnyGemmSupports(args));
  args.k = 48; // not a multiple of 32
  EXPECT_FALSE(skinnyGemmSupports(args));
  args.k = 64;
  args.m = kSkinnyGemmMaxRows + 1;
  EXPECT_FALSE(skinnyGemmSupports(args));
  args.m = 8;
  args.epilogue = GemvEpilogue::kSwiglu;
  args.n = 24; // n / 2 not a multiple of 8
  EXPECT_FALSE(skinnyGemmSupports(args));
  args.n = 32;
  EXPECT_TRUE(skinnyGemmSupports(args));
  args.epilogue = GemvEpilogue::kNone;
  args.norm = true; // the fused norm is the GEMV's
  EXPECT_FALSE(skinnyGemmSupports(args));
}

// The rotary epilogue (q/k-norm, rotary, query out, K/V into the paged
// cache, in the last block of each head) must compute bit for bit what the
// GEMV followed by the rope kernel computes; a second launch checks that
// the per-head counters were left at zero.
struct RopeCase {
  int64_t m, heads, kv_heads, head_dim, k;
  bool norms;
  int64_t rotary_dim; // < head_dim: partial rotary
};

void runRopeCase(const RopeCase &c) {
  SCOPED_TRACE("m " + std::to_string(c.m) + " heads " + std::to_string(c.heads) + "/" +
               std::to_string(c.kv_heads) + " d " + std::to_string(c.head_dim) + " k " +
               std::to_string(c.k) + (c.norms ? " q/k-norm" : ""));
  const DType bf = DType::kBF16;
  const int64_t n = (c.heads + 2 * c.kv_heads) * c.head_dim, page_size = 16, pages = 4;
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.head_dim * 31 + c.k));
  TestTensor x = randomTensor(bf, c.m, c.k, rng);
  TestTensor w = randomTensor(bf, n, c.k, rng, -0.1, 0.1);
  TestTensor q_norm = randomTensor(bf, 1, c.head_dim, rng, 0.5, 1.5);
  TestTensor k_norm = randomTensor(bf, 1, c.head_dim, rng, 0.5, 1.5);
  std::vector<float> inv_freq(c.rotary_dim / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(10000.0f, -2.0f * i / c.rotary_dim);
  std::vector<int32_t> positions, slots;
  for (int64_t t = 0; t < c.m; ++t) {
    positions.push_back(static_cast<int32_t>(rng() % 4000));
    slots.push_back(t == 2 ? -1 : static_cast<int32_t>(t * 17 + 3)); // token 2: padding
  }
  const int64_t cache_elems = pages * 2 * page_size * c.kv_heads * c.head_dim;
  TestTensor qkv = poisonedTensor(bf, c.m, n);
  void *dx = upload(x), *dw = upload(w), *dqn = upload(q_norm), *dkn = upload(k_norm);
  void *dqkv = upload(qkv), *dfreq = nullptr, *dpos = nullptr, *dslots = nullptr;
  void *dcounters = nullptr;
  ASSERT_EQ(cudaMalloc(&dfreq, inv_freq.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dfreq, inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dpos, c.m * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dpos, positions.data(), c.m * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dslots, c.m * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dslots, slots.data(), c.m * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dcounters, kGemvMaxRopeHeads * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(dcounters, 0, kGemvMaxRopeHeads * 4), cudaSuccess);

  // Two (query out, cache) pairs: the reference's and the fused launch's,
  // both poisoned (0xff bytes: bf16 NaN).
  const size_t out_bytes = c.m * c.heads * c.head_dim * 2, cache_bytes = cache_elems * 2;
  void *out[2], *cache[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cudaMalloc(&out[i], out_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&cache[i], cache_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(out[i], 0xff, out_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(cache[i], 0xff, cache_bytes), cudaSuccess);
  }
  RopeAppendArgs rope;
  rope.qkv = dqkv;
  rope.qkv_type = EType::kBF16;
  rope.positions = static_cast<const int32_t *>(dpos);
  rope.slot_mapping = static_cast<const int32_t *>(dslots);
  rope.num_tokens = c.m;
  rope.heads = c.heads;
  rope.kv_heads = c.kv_heads;
  rope.head_dim = c.head_dim;
  rope.inv_freq = static_cast<const float *>(dfreq);
  rope.half = c.rotary_dim / 2;
  rope.attention_scaling = 1.0f;
  if (c.norms) {
    rope.q_norm = dqn;
    rope.k_norm = dkn;
    rope.q_norm_type = rope.k_norm_type = EType::kBF16;
    rope.norm_eps = 1e-6f;
  }
  rope.cache_type = EType::kBF16;
  rope.page_size = page_size;
  rope.out_type = EType::kBF16;

  GemvArgs g;
  g.x = dx;
  g.w = dw;
  g.out = dqkv;
  g.m = c.m;
  g.n = n;
  g.k = c.k;
  // Reference: the GEMV, then the rope kernel.
  ASSERT_EQ(launchGemv(g, nullptr), cudaSuccess);
  rope.out = out[0];
  rope.cache = cache[0];
  ASSERT_EQ(launchRopeAppend(rope, nullptr), cudaSuccess);
  // Fused, twice (the counters must be back at zero after each launch).
  rope.out = out[1];
  rope.cache = cache[1];
  g.rope = rope;
  g.rope_counters = static_cast<unsigned *>(dcounters);
  g.pdl = true;
  ASSERT_TRUE(gemvSupports(g));
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(cudaMemset(out[1], 0xff, out_bytes), cudaSuccess);
    ASSERT_EQ(launchGemv(g, nullptr), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> got_out(out_bytes / 2), want_out(out_bytes / 2);
  std::vector<uint16_t> got_cache(cache_elems), want_cache(cache_elems);
  std::vector<unsigned> counters(kGemvMaxRopeHeads);
  ASSERT_EQ(cudaMemcpy(want_out.data(), out[0], out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_out.data(), out[1], out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(want_cache.data(), cache[0], cache_bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_cache.data(), cache[1], cache_bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(counters.data(), dcounters, kGemvMaxRopeHeads * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (void *p :
       {dx, dw, dqn, dkn, dqkv, dfreq, dpos, dslots, dcounters, out[0], out[1], cache[0], cache[1]})
    cudaFree(p);
  int bad = 0;
  for (size_t i = 0; i < want_out.size(); ++i)
    if (got_out[i] != want_out[i] && ++bad <= 5)
      ADD_FAILURE() << "query element " << i << ": bits " << got_out[i] << ", want " << want_out[i];
  for (size_t i = 0; i < want_cache.size(); ++i)
    if (got_cache[i] != want_cache[i] && ++bad <= 5)
      ADD_FAILURE() << "cache element " << i << ": bits " << got_cache[i] << ", want "
                    << want_cache[i];
  EXPECT_EQ(bad, 0);
  EXPECT_NE(want_out[0], 0xffff) << "the reference must have written the query";
  for (unsigned counter : counters)
    ASSERT_EQ(counter, 0u) << "the per-head counters must be left at zero";
}

TEST(GemvTest, RopeEpilogueMatchesTheRopeKernel) {
  TXC_SKIP_WITHOUT_GPU();
  const RopeCase cases[] = {
      {1, 16, 8, 128, 1024, true, 128},  // Qwen3-0.6B
      {1, 32, 8, 128, 4096, false, 128}, // Llama-3-8B
      {3, 4, 2, 64, 264, false, 64},     {4, 4, 1, 256, 512, true, 256},
      {4, 6, 2, 64, 1000, false, 32}, // partial rotary
  };
  for (const RopeCase &c : cases)
    runRopeCase(c);
}

TEST(GemvTest, RefusesWhatItDoesNotTake) {
  GemvArgs args;
  args.x = args.w = reinterpret_cast<void *>(256);
  args.m = 1;
  args.n = 4;
  args.k = 64;
  EXPECT_TRUE(gemvSupports(args));
  args.k = 60; // not a multiple of 8
  EXPECT_FALSE(gemvSupports(args));
  args.k = 64;
  args.m = kGemvMaxRows + 1;
  EXPECT_FALSE(gemvSupports(args));
  args.m = 1;
  args.type = EType::kF32;
  EXPECT_FALSE(gemvSupports(args));
  args.type = EType::kBF16;
  args.out_type = EType::kF16; // neither the input type nor F32
  EXPECT_FALSE(gemvSupports(args));
  args.out_type = EType::kBF16;
  args.w = reinterpret_cast<void *>(258); // misaligned
  EXPECT_FALSE(gemvSupports(args));
  args.w = reinterpret_cast<void *>(256);
  args.epilogue = GemvEpilogue::kSwiglu;
  args.n = 5;
  EXPECT_FALSE(gemvSupports(args));
  args.epilogue = GemvEpilogue::kResidualAdd;
  args.n = 4;
  EXPECT_FALSE(gemvSupports(args)) << "a residual epilogue needs the residual";
  args.epilogue = GemvEpilogue::kNone;
  unsigned counters = 0;
  args.rope_counters = &counters;
  args.rope.qkv = args.out = reinterpret_cast<void *>(512);
  args.rope.qkv_type = args.rope.out_type = EType::kBF16;
  args.rope.num_tokens = 1;
  args.rope.heads = 2;
  args.rope.kv_heads = 1;
  args.rope.head_dim = 8; // not a multiple of 16: a block's rows could straddle heads
  args.rope.half = 4;
  args.n = 32;
  EXPECT_FALSE(gemvSupports(args));
  args.rope.head_dim = 16;
  args.rope.half = 8;
  args.n = 64;
  EXPECT_TRUE(gemvSupports(args));
  args.n = 66; // not the QKV's width
  EXPECT_FALSE(gemvSupports(args));
}

} // namespace
} // namespace txc::cuda
