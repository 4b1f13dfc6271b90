//===- decode_ops_bench.cu - Decode GEMVs and the launch floor on the GPU -===//
//
// Where a decode step's time goes, op by op, without the model around it:
// for each projection of the Qwen3-0.6B and Llama-3-8B shapes the GEMV of
// the CUDA backend (Gemv.cu, m = 1 and 4), its tensor-core skinny GEMM
// (SkinnyGemm.cu, m = 4 and 8), its wgmma decode GEMM (DecodeGemm.cu,
// m = 32 and 64) and cuBLASLt as the executor calls it (CublasGemm.h,
// m = 8, 32 and 64, with the heuristic's algorithm and tuned) are launched
// 200 times back to back,
// rotating over enough weight copies that every launch reads from DRAM
// (L2 is 60 MB), and timed with CUDA events: plainly on a stream, and
// replayed from a CUDA graph with programmatic dependent launch (how a
// decode step runs). An empty kernel gives the launch floor, a 2-row GEMV
// the floor of a GEMV in the chain; a device copy gives the bandwidth
// ceiling. Median of 7 batches after a warm-up. Last, each model's step of
// GEMVs in order, replayed from one graph, against the sum of its ops, and
// its GEMMs at 32 rows on cuBLASLt (heuristic, tuned) and on the decode GEMM.
// --sweep times instead every GemvConfig at m = 1 (graph+pdl), for choosing
// the defaults, then each model's step of GEMVs with gemvConfigFor against
// one with the sweep's fastest configuration for every shape.
//
// --steps times only the copy, the launch floor and the models' steps of
// GEMVs, for a short device call.
//
//   decode_ops_bench [--sweep | --steps] [--json FILE]
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CublasGemm.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DecodeGemm.h"
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/SkinnyGemm.h"
#include "cuda_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace txc::cuda;

#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    txc::Status s_ = (expr);                                                                       \
    if (!s_.isOk()) {                                                                              \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.toString().c_str());              \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

constexpr int kLaunches = 200;
constexpr int kBatches = 7;

__global__ void emptyKernel() {
  pdlLaunchDependents();
  pdlWait();
}

__global__ void fillKernel(unsigned short *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = (unsigned(i) * 2654435761u) ^ seed;
    p[i] =
        static_cast<unsigned short>(0x3c00 | (h & 0x3ff)) ^ ((h >> 16) & 0x8000); // +-[0.5,1) bf16
  }
}

template <typename Enqueue> float timeMs(Enqueue enqueue, cudaStream_t stream, bool graph) {
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    BENCH_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kLaunches; ++i)
      enqueue(i);
    BENCH_CHECK_CUDA(cudaStreamEndCapture(stream, &g));
    BENCH_CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    BENCH_CHECK_CUDA(cudaGraphDestroy(g));
  }
  cudaEvent_t a, b;
  BENCH_CHECK_CUDA(cudaEventCreate(&a));
  BENCH_CHECK_CUDA(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int batch = 0; batch <= kBatches; ++batch) { // batch 0 warms up
    BENCH_CHECK_CUDA(cudaEventRecord(a, stream));
    if (graph)
      BENCH_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    else
      for (int i = 0; i < kLaunches; ++i)
        enqueue(i);
    BENCH_CHECK_CUDA(cudaEventRecord(b, stream));
    BENCH_CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    if (batch > 0)
      ms.push_back(t / kLaunches);
  }
  std::sort(ms.begin(), ms.end());
  if (exec)
    BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CHECK_CUDA(cudaEventDestroy(a));
  BENCH_CHECK_CUDA(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

struct Shape {
  const char *model, *op;
  int64_t n, k;
  GemvEpilogue epilogue;
  bool f32_out;
  bool norm = false; // the rms_norm before it folded in (--fuse-norms)
};

} // namespace

int main(int argc, char **argv) {
  const char *json_path = nullptr;
  bool sweep = false, steps_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--sweep") {
      sweep = true;
    } else if (arg == "--steps") {
      steps_only = true;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: decode_ops_bench [--sweep | --steps] [--json FILE]\n");
      return 2;
    }
  }
  cudaStream_t stream;
  BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CHECK_CUDA(prepareDecodeGemm());
  DecodeGemmWorkspace decode_workspace; // shared tiles' partials and counters
  decode_workspace.partial_floats = int64_t{2} << 20;
  decode_workspace.num_counters = 4096;
  BENCH_CHECK_CUDA(cudaMalloc(&decode_workspace.partials, decode_workspace.partial_floats * sizeof(float)));
  BENCH_CHECK_CUDA(cudaMalloc(&decode_workspace.counters, decode_workspace.num_counters * sizeof(unsigned)));
  BENCH_CHECK_CUDA(cudaMemset(decode_workspace.counters, 0, decode_workspace.num_counters * sizeof(unsigned)));
  // cuBLASLt as the executor calls it (CublasGemm.h; SwiGLU as an fp32 GEMM
  // and launchSwiglu), for the rows the executor leaves to it.
  void *cublas_workspace = nullptr;
  BENCH_CHECK_CUDA(cudaMalloc(&cublas_workspace, kCublasWorkspaceBytes));
  CublasGemm cublas, tuned_cublas; // the heuristic's algorithm; the fastest of its candidates
  CHECK_OK(cublas.init(cublas_workspace, kCublasWorkspaceBytes));
  CHECK_OK(tuned_cublas.init(cublas_workspace, kCublasWorkspaceBytes));
  tuned_cublas.setTuning(true);
  float *swiglu_acc = nullptr; // [64, 2 x 16384] at most
  BENCH_CHECK_CUDA(cudaMalloc(&swiglu_acc, size_t(64) * 32768 * 4));
  enum class Kernel { kGemv, kGemvSweepBest, kSkinny, kDecode, kCublas, kCublasTuned };
  // --sweep: the fastest configuration of each (n, k) at m = 1 (with or
  // without the fused norm, whichever was timed faster).
  std::map<std::pair<int64_t, int64_t>, std::pair<float, GemvConfig>> sweep_best;
  auto launch = [&](Kernel kernel, const GemvArgs &a) {
    switch (kernel) {
    case Kernel::kGemv:
      BENCH_CHECK_CUDA(launchGemv(a, stream));
      return;
    case Kernel::kGemvSweepBest: {
      auto best = sweep_best.find({a.n, a.k});
      BENCH_CHECK_CUDA(launchGemvWithConfig(
          a, best != sweep_best.end() ? best->second.second : gemvConfigFor(a.n, a.k), stream));
      return;
    }
    case Kernel::kSkinny:
      BENCH_CHECK_CUDA(launchSkinnyGemm(a, stream));
      return;
    case Kernel::kDecode:
      BENCH_CHECK_CUDA(launchDecodeGemm(a, decode_workspace, stream));
      return;
    case Kernel::kCublas:
    case Kernel::kCublasTuned: {
      CublasGemm &lt = kernel == Kernel::kCublas ? cublas : tuned_cublas;
      const txc::DType in = txc::DType::kBF16;
      const txc::DType out = a.out_type == EType::kF32 ? txc::DType::kF32 : txc::DType::kBF16;
      if (a.epilogue == GemvEpilogue::kSwiglu) {
        CHECK_OK(lt.run(a.m, a.n, a.k, {a.x, in}, {a.w, in}, {}, {}, swiglu_acc, txc::DType::kF32,
                        stream));
        BENCH_CHECK_CUDA(launchSwiglu(swiglu_acc, a.m, a.n / 2, a.out, a.out_type, stream));
        return;
      }
      const GemmOperand residual = a.residual ? GemmOperand{a.residual, out} : GemmOperand{};
      CHECK_OK(lt.run(a.m, a.n, a.k, {a.x, in}, {a.w, in}, {}, residual, a.out, out, stream));
      return;
    }
    }
  };
  auto tag = [](Kernel kernel) {
    switch (kernel) {
    case Kernel::kSkinny:
      return " [skinny]";
    case Kernel::kDecode:
      return " [decode]";
    case Kernel::kCublas:
      return " [cublas]";
    case Kernel::kCublasTuned:
      return " [cublas-tuned]";
    default:
      return "";
    }
  };
  std::string json = "{\"rows\": [\n";
  bool first = true;
  auto row = [&](const std::string &what, int m, const char *mode, float us, double gbps) {
    std::printf("%-34s m=%d %-10s %8.2f us %8.0f GB/s\n", what.c_str(), m, mode, us, gbps);
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s {\"op\": \"%s\", \"m\": %d, \"mode\": \"%s\", \"us\": %.3f, \"gbps\": %.1f}",
                  first ? "" : ",\n", what.c_str(), m, mode, us, gbps);
    json += line;
    first = false;
  };

  // The ceiling: a device-to-device copy of 1 GiB (read + write counted).
  size_t copy_bytes = size_t(1) << 30;
  void *src, *dst;
  BENCH_CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  BENCH_CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  float copy_ms = timeMs(
      [&](int) { BENCH_CHECK_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, stream)); },
      stream, false);
  row("device copy 1 GiB", 0, "stream", copy_ms * 1000, 2.0 * copy_bytes / (copy_ms * 1e6));
  BENCH_CHECK_CUDA(cudaFree(src));
  BENCH_CHECK_CUDA(cudaFree(dst));

  for (bool graph : {false, true})
    row("empty kernel", 0, graph ? "graph+pdl" : "stream",
        1000 * timeMs(
                   [&](int) {
                     BENCH_CHECK_CUDA(launchKernel(emptyKernel, dim3(132), dim3(128), 0, stream, graph));
                   },
                   stream, graph),
        0);

  const Shape shapes[] = {
      {"floor", "2-row gemv", 2, 256, GemvEpilogue::kNone, false},
      {"qwen3-0.6b", "qkv", 4096, 1024, GemvEpilogue::kNone, false},
      {"qwen3-0.6b", "o_proj+residual", 1024, 2048, GemvEpilogue::kResidualAdd, false},
      {"qwen3-0.6b", "gate_up+swiglu", 6144, 1024, GemvEpilogue::kSwiglu, false},
      {"qwen3-0.6b", "qkv with rms_norm", 4096, 1024, GemvEpilogue::kNone, false, true},
      {"qwen3-0.6b", "gate_up+swiglu with rms_norm", 6144, 1024, GemvEpilogue::kSwiglu, false,
       true},
      {"qwen3-0.6b", "down+residual", 1024, 3072, GemvEpilogue::kResidualAdd, false},
      {"qwen3-0.6b", "lm_head (f32)", 151936, 1024, GemvEpilogue::kNone, true},
      {"llama-3-8b", "qkv", 6144, 4096, GemvEpilogue::kNone, false},
      {"llama-3-8b", "o_proj+residual", 4096, 4096, GemvEpilogue::kResidualAdd, false},
      {"llama-3-8b", "gate_up+swiglu", 28672, 4096, GemvEpilogue::kSwiglu, false},
      {"llama-3-8b", "down+residual", 4096, 14336, GemvEpilogue::kResidualAdd, false},
      {"llama-3-8b", "lm_head (f32)", 128256, 4096, GemvEpilogue::kNone, true},
  };
  for (const Shape &s : shapes) {
    if (steps_only)
      break;
    size_t weight_bytes = size_t(s.n) * s.k * 2;
    int copies = static_cast<int>(std::max<size_t>(1, (size_t(256) << 20) / weight_bytes + 1));
    copies = std::min(copies, kLaunches);
    std::vector<unsigned short *> w(copies);
    for (auto &p : w) {
      BENCH_CHECK_CUDA(cudaMalloc(&p, weight_bytes));
      fillKernel<<<1024, 256, 0, stream>>>(p, weight_bytes / 2, 7u);
    }
    unsigned short *x, *residual, *gamma;
    BENCH_CHECK_CUDA(cudaMalloc(&gamma, size_t(s.k) * 2));
    fillKernel<<<64, 256, 0, stream>>>(gamma, size_t(s.k), 9u);
    void *out;
    BENCH_CHECK_CUDA(cudaMalloc(&x, size_t(64) * s.k * 2));
    fillKernel<<<64, 256, 0, stream>>>(x, size_t(64) * s.k, 3u);
    BENCH_CHECK_CUDA(cudaMalloc(&residual, size_t(64) * s.n * 2));
    fillKernel<<<64, 256, 0, stream>>>(residual, size_t(64) * s.n, 5u);
    BENCH_CHECK_CUDA(cudaMalloc(&out, size_t(64) * s.n * 4));
    // The GEMV at 1 and 4 rows; the tensor-core skinny GEMM at 4 and 8
    // (batch 3-8), the wgmma decode GEMM at 32 and 64 and cuBLASLt at all
    // three sizes (none of those takes the fused norm; cuBLASLt's rows in
    // "graph+pdl" are a graph, cuBLASLt has no PDL).
    struct Variant {
      int m;
      Kernel kernel;
    };
    auto args = [&](int m, bool graph) {
      GemvArgs a;
      a.x = x;
      a.type = EType::kBF16;
      a.out_type = s.f32_out ? EType::kF32 : EType::kBF16;
      a.residual = s.epilogue == GemvEpilogue::kResidualAdd ? residual : nullptr;
      a.out = out;
      a.m = m;
      a.n = s.n;
      a.k = s.k;
      a.epilogue = s.epilogue;
      a.pdl = graph;
      a.norm = s.norm;
      a.norm_weight = s.norm ? gamma : nullptr;
      a.norm_type = EType::kBF16;
      a.norm_eps = 1e-6f;
      return a;
    };
    if (sweep) {
      for (int warps : {4, 8})
        for (int unroll : {2, 4, 8})
          for (int target : {16, 32, 64, 128, 256}) {
            GemvConfig c;
            c.warps_per_block = warps;
            c.unroll = unroll;
            c.target_warps_per_sm = target;
            GemvArgs a = args(1, true);
            float ms = timeMs(
                [&](int i) {
                  a.w = w[i % copies];
                  BENCH_CHECK_CUDA(launchGemvWithConfig(a, c, stream));
                },
                stream, true);
            char what[160];
            std::snprintf(what, sizeof what, "%s %s w%d u%d t%d", s.model, s.op, warps, unroll,
                          target);
            row(what, 1, "graph+pdl", ms * 1000, weight_bytes / (ms * 1e6));
            auto &best = sweep_best[{s.n, s.k}];
            if (best.first == 0.f || ms < best.first)
              best = {ms, c};
          }
    }
    // [cublas-tuned] comes after the stream row tuned its shape (tuning
    // waits for an uncaptured call).
    const Kernel gemv = Kernel::kGemv, skinny = Kernel::kSkinny, decode = Kernel::kDecode,
                 lt = Kernel::kCublas, tuned = Kernel::kCublasTuned;
    for (Variant v : {Variant{1, gemv}, Variant{4, gemv}, Variant{4, skinny}, Variant{8, skinny},
                      Variant{8, lt}, Variant{8, tuned}, Variant{32, decode}, Variant{32, lt},
                      Variant{32, tuned}, Variant{64, decode}, Variant{64, lt}, Variant{64, tuned}})
      for (bool graph : {false, true}) {
        if (sweep || (v.kernel != gemv && s.norm))
          continue;
        const int m = v.m;
        GemvArgs a = args(m, graph);
        float ms = timeMs(
            [&](int i) {
              a.w = w[i % copies];
              launch(v.kernel, a);
            },
            stream, graph);
        row(std::string(s.model) + " " + s.op + tag(v.kernel), m, graph ? "graph+pdl" : "stream",
            ms * 1000, weight_bytes / (ms * 1e6));
      }
    for (auto *p : w)
      BENCH_CHECK_CUDA(cudaFree(p));
    BENCH_CHECK_CUDA(cudaFree(x));
    BENCH_CHECK_CUDA(cudaFree(gamma));
    BENCH_CHECK_CUDA(cudaFree(residual));
    BENCH_CHECK_CUDA(cudaFree(out));
  }
  // A step's GEMVs in order (qkv with the norm, o_proj + residual, gate/up
  // with the norm + SwiGLU, down + residual per layer, then the lm_head)
  // replayed from one graph with PDL: against the sum of the same ops timed
  // in chains of themselves above, what a transition between different
  // GEMVs costs. Enough weight copies per op that L2 holds none of them.
  // Then the same step's GEMMs at 32 rows (no norm: batch 32 runs it on its
  // own) on cuBLASLt (the heuristic's algorithms, then the tuned ones) and
  // on the decode GEMM, compared in the order the model runs them.
  struct Model {
    const char *name;
    int layers;
    int64_t hidden, qkv, q_width, inter, vocab;
  };
  for (const Model &model : {Model{"qwen3-0.6b", 28, 1024, 4096, 2048, 3072, 151936},
                             Model{"llama-3-8b", 32, 4096, 6144, 4096, 14336, 128256}}) {
    struct Op {
      int64_t n, k;
      GemvEpilogue epilogue;
      bool norm;
    };
    const Op ops[] = {{model.qkv, model.hidden, GemvEpilogue::kNone, true},
                      {model.hidden, model.q_width, GemvEpilogue::kResidualAdd, false},
                      {2 * model.inter, model.hidden, GemvEpilogue::kSwiglu, true},
                      {model.hidden, model.inter, GemvEpilogue::kResidualAdd, false}};
    size_t layer_bytes = 0;
    for (const Op &op : ops)
      layer_bytes += size_t(op.n) * op.k * 2;
    const int copies =
        std::min<int>(model.layers, static_cast<int>((size_t(240) << 20) / layer_bytes) + 1);
    std::vector<unsigned short *> weights;
    auto alloc = [&](size_t elems, unsigned seed) {
      unsigned short *p = nullptr;
      BENCH_CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(elems, 8) * 2));
      fillKernel<<<1024, 256, 0, stream>>>(p, elems, seed);
      weights.push_back(p);
      return p;
    };
    std::vector<std::vector<unsigned short *>> layer_w(copies);
    for (auto &lw : layer_w)
      for (const Op &op : ops)
        lw.push_back(alloc(size_t(op.n) * op.k, 7u));
    unsigned short *head = alloc(size_t(model.vocab) * model.hidden, 7u);
    unsigned short *gamma = alloc(size_t(model.hidden), 9u);
    constexpr int kStepRows = 32; // the batched step's
    unsigned short *h = alloc(size_t(kStepRows) * model.hidden, 3u);
    unsigned short *qkv = // q read as the attention output
        alloc(size_t(kStepRows) * (model.qkv + model.q_width), 3u);
    unsigned short *act = alloc(size_t(kStepRows) * model.inter, 3u);
    float *logits = nullptr;
    BENCH_CHECK_CUDA(cudaMalloc(&logits, size_t(kStepRows) * model.vocab * 4));
    // One step's GEMMs in the model's order, m rows each, replayed from one
    // graph; the GEMV (m = 1) takes the norms before qkv, gate/up and the
    // lm_head fused. Returns the step's milliseconds.
    auto timeStep = [&](Kernel kernel, int m) {
      const bool fused_norms = kernel == Kernel::kGemv || kernel == Kernel::kGemvSweepBest;
      auto gemm = [&](const void *x, const void *w, int64_t n, int64_t k, GemvEpilogue e, bool norm,
                      void *out, EType out_type) {
        GemvArgs a;
        a.x = x;
        a.w = w;
        a.m = m;
        a.n = n;
        a.k = k;
        a.epilogue = e;
        a.out = out;
        a.out_type = out_type;
        a.residual = e == GemvEpilogue::kResidualAdd ? out : nullptr;
        a.norm = fused_norms && norm;
        a.norm_weight = a.norm ? gamma : nullptr;
        a.norm_eps = 1e-6f;
        a.pdl = true;
        launch(kernel, a);
      };
      const void *inputs[] = {h, qkv, h, act};
      void *outputs[] = {qkv, h, act, h};
      auto step = [&] {
        for (int l = 0; l < model.layers; ++l)
          for (int o = 0; o < 4; ++o)
            gemm(inputs[o], layer_w[l % copies][o], ops[o].n, ops[o].k, ops[o].epilogue,
                 ops[o].norm, outputs[o], EType::kBF16);
        gemm(h, head, model.vocab, model.hidden, GemvEpilogue::kNone, true, logits, EType::kF32);
      };
      if (kernel == Kernel::kCublasTuned) { // tuning waits for an uncaptured call
        step();
        BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
      }
      // timeMs divides by kLaunches; the graph holds one step.
      return kLaunches * timeMs(
                             [&](int i) {
                               if (i == 0) // one step per replay
                                 step();
                             },
                             stream, true);
    };
    const size_t step_bytes = layer_bytes * model.layers + size_t(model.vocab) * model.hidden * 2;
    const float gemv_ms = timeStep(Kernel::kGemv, 1);
    row(std::string(model.name) + " step of GEMVs (graph)", 1, "graph+pdl", gemv_ms * 1000,
        step_bytes / (gemv_ms * 1e6));
    if (sweep) {
      const float best_ms = timeStep(Kernel::kGemvSweepBest, 1);
      row(std::string(model.name) + " step of GEMVs (graph) [sweep best]", 1, "graph+pdl",
          best_ms * 1000, step_bytes / (best_ms * 1e6));
    }
    for (Kernel kernel : {Kernel::kCublas, Kernel::kCublasTuned, Kernel::kDecode}) {
      if (sweep || steps_only)
        break;
      const float ms = timeStep(kernel, kStepRows);
      row(std::string(model.name) + " step of GEMMs (graph)" + tag(kernel), kStepRows, "graph+pdl",
          ms * 1000, step_bytes / (ms * 1e6));
    }
    for (auto *p : weights)
      BENCH_CHECK_CUDA(cudaFree(p));
    BENCH_CHECK_CUDA(cudaFree(logits));
  }

  json += "\n]}\n";
  if (json_path) {
    FILE *f = std::fopen(json_path, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path);
      return 1;
    }
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
