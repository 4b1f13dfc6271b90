//===- CudaExecutor.cpp - Run an artifact's plan on one GPU ---------------===//
//
// Binding mirrors CpuExecutor: an arena slot's -1 row dimension is set per
// step by the launch that writes the slot and remembered per offset (host
// bookkeeping only; nothing waits on the GPU). Inputs that overlap a result
// in a way a kernel could race on are copied to scratch first.
//
//===----------------------------------------------------------------------===//
// The kernel library's status.h defines its own TXC_RETURN_IF_ERROR for
// txc::kernels::Status: include it first and let txc/Status.h's win.
#include "attention/attention.h"
#undef TXC_RETURN_IF_ERROR
#undef TXC_ASSIGN_OR_RETURN

#include "runtime/backends/cuda/CudaExecutor.h"
#include "runtime/backends/cpu/Kernels.h" // shapeString, GemmEpilogue
#include "runtime/backends/cpu/LaunchAttributes.h"
#include "runtime/backends/cpu/PlanValues.h"
#include "runtime/backends/cpu/Rotary.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/Sampler.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace txc::cuda {

namespace pb = artifact::pb;
using cpu::LaunchAttributes;
using cpu::shapeString;
using cpu::MatrixShape;
using cpu::arenaOperandShape;
using cpu::weightOperandShape;

namespace {

const std::set<std::string> &knownOps() {
  static const std::set<std::string> ops = {
      "txk.embedding",   "txk.rms_norm",  "txk.add_rms_norm",
      "txk.gemm",        "txk.rope_append", "txk.gemm_rope_append",
      "txk.attention",   "txk.gather_last"};
  return ops;
}

bool usesKvCache(const std::string &op) {
  return op == "txk.rope_append" || op == "txk.gemm_rope_append" ||
         op == "txk.attention";
}

Status cudaStatus(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  if (error == cudaErrorMemoryAllocation)
    return resourceExhausted(what + ": out of GPU memory (" +
                             cudaGetErrorString(error) + ")");
  return internalError(what + ": " + cudaGetErrorName(error) + " (" +
                       cudaGetErrorString(error) + ")");
}

Status cublasStatus(cublasStatus_t status, const std::string &what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return internalError(what + ": cuBLASLt status " +
                       std::to_string(static_cast<int>(status)));
}

#define CU(call, what) TXC_RETURN_IF_ERROR(cudaStatus((call), (what)))

StatusOr<EType> etype(DType dtype, const std::string &what) {
  switch (dtype) {
  case DType::kF32: return EType::kF32;
  case DType::kBF16: return EType::kBF16;
  case DType::kF16: return EType::kF16;
  default:
    return unimplemented(what + " has dtype " + std::string(dtypeName(dtype)) +
                         "; the CUDA kernels take F32, BF16 or F16");
  }
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
  case DType::kBF16: return CUDA_R_16BF;
  case DType::kF16: return CUDA_R_16F;
  default: return CUDA_R_32F;
  }
}

std::string describeLaunch(int index, const pb::Launch &launch) {
  std::string text = "launch " + std::to_string(index) + " (" + launch.op();
  if (!launch.location().empty())
    text += " at " + launch.location();
  return text + ")";
}

Status withContext(const std::string &context, const Status &status) {
  if (status.isOk())
    return status;
  return Status(status.code(), context + ": " + status.message());
}

bool overlaps(const void *a, uint64_t a_bytes, const void *b, uint64_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a && b && x < y + b_bytes && y < x + a_bytes;
}

/// A device tensor view (row-major 2-D).
struct DMatrix {
  void *data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t rows = 0, cols = 0;
  bool present() const { return data != nullptr; }
  uint64_t bytes() const {
    return static_cast<uint64_t>(rows * cols) * dtypeSize(dtype);
  }
};

struct Bound {
  enum class Kind { kAbsent, kMatrix, kTokenIds, kPositions, kBatch, kCache } kind =
      Kind::kAbsent;
  DMatrix matrix;
  int32_t layer = -1;
};

struct LayerCache {
  void *data = nullptr;
  int64_t kv_heads = 0, head_dim = 0;
};

struct RopeTable {
  float *inv_freq = nullptr; // device
  int64_t half = 0;
  float attention_scaling = 1.0f;
};

struct GemmPlanKey {
  int64_t m, n, k;
  int a, b, c, d, bias;
  bool operator<(const GemmPlanKey &o) const {
    return std::tie(m, n, k, a, b, c, d, bias) <
           std::tie(o.m, o.n, o.k, o.a, o.b, o.c, o.d, o.bias);
  }
};

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo;
};

bool slotsOverlap(const pb::ValueRef &a, const pb::ValueRef &b) {
  return a.ref_case() == pb::ValueRef::kArena && b.ref_case() == pb::ValueRef::kArena &&
         a.arena().offset() < b.arena().offset() + b.arena().bytes() &&
         b.arena().offset() < a.arena().offset() + a.arena().bytes();
}

/// The rms_norm launches whose result is operand 0 of the very next launch,
/// a GEMM, and is read by nothing else before the slot is written again.
std::set<int> fusableNorms(const pb::Plan &plan) {
  std::set<int> fusable;
  for (int i = 0; i + 1 < plan.launches_size(); ++i) {
    const pb::Launch &norm = plan.launches(i), &next = plan.launches(i + 1);
    if (norm.op() != "txk.rms_norm" || norm.results_size() != 1 ||
        (next.op() != "txk.gemm" && next.op() != "txk.gemm_rope_append") ||
        next.operands_size() == 0)
      continue;
    const pb::ValueRef &slot = norm.results(0);
    if (slot.ref_case() != pb::ValueRef::kArena ||
        next.operands(0).ref_case() != pb::ValueRef::kArena ||
        next.operands(0).arena().offset() != slot.arena().offset())
      continue;
    bool only_reader = true;
    for (int k = 1; k < next.operands_size(); ++k)
      only_reader = only_reader && !slotsOverlap(next.operands(k), slot);
    for (int j = i + 2; only_reader && j < plan.launches_size(); ++j) {
      const pb::Launch &later = plan.launches(j);
      for (const pb::ValueRef &operand : later.operands())
        only_reader = only_reader && !slotsOverlap(operand, slot);
      bool overwritten = false;
      for (const pb::ValueRef &result : later.results())
        if (slotsOverlap(result, slot)) {
          bool covers = result.arena().offset() <= slot.arena().offset() &&
                        result.arena().offset() + result.arena().bytes() >=
                            slot.arena().offset() + slot.arena().bytes();
          only_reader = only_reader && covers;
          overwritten = true;
        }
      if (overwritten)
        break;
    }
    if (only_reader)
      fusable.insert(i);
  }
  return fusable;
}

constexpr int kMaxDecodeSplits = 32;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

} // namespace

struct CudaExecutor::State {
  const artifact::LoadedArtifact *artifact = nullptr;
  CudaExecutorOptions options;
  const pb::Plan *plan = nullptr;
  std::string path;
  int32_t vocab_size = 0, page_size = 0, num_pages = 0;
  DType cache_dtype = DType::kInvalid;
  int64_t max_num_seqs = 256;

  cudaStream_t stream = nullptr;
  cudaEvent_t step_start = nullptr, step_end = nullptr;
  // profile_launches: one event before each launch and one at the end.
  bool profile = false;
  std::vector<cudaEvent_t> launch_events;
  std::map<std::pair<std::string, bool>, LaunchProfileEntry> profile_totals;
  cublasLtHandle_t lt = nullptr;
  std::vector<void *> allocations;
  std::vector<void *> weights;         // device pointer per manifest entry
  unsigned char *arena = nullptr;
  uint64_t arena_bytes = 0;
  std::map<int32_t, LayerCache> caches;
  std::map<int, RopeTable> rope_tables; // per launch index
  unsigned char *gemm_scratch = nullptr;
  uint64_t gemm_scratch_bytes = 0;
  unsigned char *copy_scratch = nullptr;
  uint64_t copy_scratch_bytes = 0, copy_scratch_used = 0;
  void *cublas_workspace = nullptr;
  unsigned char *decode_workspace = nullptr;
  uint64_t decode_workspace_bytes = 0;
  unsigned *split_counters = nullptr;
  int64_t max_heads = 0, max_kv_heads = 0, max_head_dim = 0;
  float *device_logits = nullptr;
  int64_t device_logits_rows = 0;
  int32_t *host_inputs = nullptr, *device_inputs = nullptr;
  size_t inputs_capacity = 0;
  std::map<GemmPlanKey, GemmPlan> gemm_plans;
  float last_step_ms = 0.0f;
  // Sampling on the device (argmax alone when every row is greedy), tokens
  // back through pinned memory.
  int32_t *device_tokens = nullptr, *host_tokens = nullptr;
  engine::RowSampling *device_row_sampling = nullptr, *host_row_sampling = nullptr;
  void *sampling_workspace = nullptr;
  size_t sampling_workspace_bytes = 0;
  std::vector<float> host_logits; // non-greedy rows sampled on the host
  // Decode steps replay a CUDA graph per (batch bucket, context bucket); the
  // context bucket fixes the split-KV count the graph was captured with.
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> decode_graphs;
  int32_t graph_max_batch = 0; // 0: no graphs
  engine::Batch padded;        // the bucket-sized batch a graph runs
  int32_t graph_context = 0;   // > 0 while running a graph: planning context
  // rms_norm launches whose result only the next launch's GEMM reads: for
  // decode-sized batches the GEMV applies the norm in its prologue and the
  // norm launch is skipped (fusableNorms).
  std::set<int> fusable_norms;
  struct PendingNorm {
    bool active = false;
    DMatrix input, weight, out;
    float eps = 0.0f;
  } pending_norm;

  // The step being run.
  const engine::Batch *batch = nullptr;
  const int32_t *d_tokens = nullptr, *d_positions = nullptr, *d_slots = nullptr,
                *d_qso = nullptr, *d_context = nullptr, *d_tables = nullptr;
  int32_t max_new_tokens = 0, max_context = 0;
  std::unordered_map<uint64_t, int64_t> rows_at_offset;
  bool wrote_logits = false;

  ~State();
  StatusOr<void *> allocate(uint64_t bytes, const std::string &what);
  Status prepare();
  Status validateBatch(const engine::Batch &batch) const;
  Status uploadInputs(const engine::Batch &batch);
  Status runLaunch(int index, const pb::Launch &launch);
  Status enqueueLaunches(const engine::Batch &batch);
  bool graphable(const engine::Batch &batch) const;
  Status runDecodeGraph(const engine::Batch &batch);
  Status step(const engine::Batch &batch, float *logits, int32_t *tokens,
              const std::vector<engine::RowSampling> *sampling = nullptr);
  Status warmUp();

  StatusOr<Bound> bindOperand(const pb::Launch &launch, int i, bool required);
  StatusOr<DMatrix> floatOperand(const pb::Launch &launch, int i, bool required);
  StatusOr<DMatrix> bindResult(const pb::Launch &launch, int i, int64_t rows);
  StatusOr<DMatrix> copyToScratch(const DMatrix &input);
  Status unalias(std::vector<DMatrix *> inputs, std::vector<DMatrix> results);
  Status gemm(const DMatrix &input, const DMatrix &weight, const DMatrix &bias,
              const DMatrix &residual, const DMatrix &out);
  StatusOr<bool> tryGemv(const DMatrix &input, const DMatrix &weight,
                         const DMatrix &bias, const DMatrix &residual,
                         GemvEpilogue epilogue, const DMatrix &out);
  Status launchNorm(const DMatrix &input, const DMatrix *residual, const DMatrix &weight,
                    float eps, const DMatrix *sum, const DMatrix &out);
  Status flushPendingNorm();
  Status attention(const LaunchAttributes &attributes, const DMatrix &query,
                   const LayerCache &cache, const DMatrix &out);
};

CudaExecutor::State::~State() {
  if (stream)
    cudaStreamSynchronize(stream);
  for (auto &[key, plan] : gemm_plans) {
    cublasLtMatmulDescDestroy(plan.op);
    for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c, plan.d})
      cublasLtMatrixLayoutDestroy(l);
  }
  for (auto &[key, graph] : decode_graphs)
    cudaGraphExecDestroy(graph);
  if (lt)
    cublasLtDestroy(lt);
  if (host_tokens)
    cudaFreeHost(host_tokens);
  if (host_row_sampling)
    cudaFreeHost(host_row_sampling);
  for (void *p : allocations)
    cudaFree(p);
  if (host_inputs)
    cudaFreeHost(host_inputs);
  for (cudaEvent_t event : launch_events)
    cudaEventDestroy(event);
  if (step_start)
    cudaEventDestroy(step_start);
  if (step_end)
    cudaEventDestroy(step_end);
  if (stream)
    cudaStreamDestroy(stream);
}

StatusOr<void *> CudaExecutor::State::allocate(uint64_t bytes,
                                               const std::string &what) {
  void *p = nullptr;
  cudaError_t error = cudaMalloc(&p, std::max<uint64_t>(bytes, 256));
  if (error != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return resourceExhausted(path + ": cannot allocate " + std::to_string(bytes) +
                             " bytes of GPU memory for " + what + " (" +
                             std::to_string(free_bytes) + " of " +
                             std::to_string(total) + " free): " +
                             cudaGetErrorString(error));
  }
  allocations.push_back(p);
  return p;
}

// --- preparation -----------------------------------------------------------

Status CudaExecutor::State::prepare() {
  const pb::Artifact &message = artifact->message();
  path = artifact->path();
  int device_count = 0;
  cudaError_t error = cudaGetDeviceCount(&device_count);
  if (error != cudaSuccess || device_count == 0)
    return failedPrecondition(
        path + ": no CUDA GPU is available (" +
        std::string(error == cudaSuccess ? "no devices"
                                         : cudaGetErrorString(error)) +
        "); use --device cpu");
  if (options.device < 0 || options.device >= device_count)
    return invalidArgument(path + ": GPU " + std::to_string(options.device) +
                           " does not exist (" + std::to_string(device_count) +
                           " present)");
  CU(cudaSetDevice(options.device), path + ": cudaSetDevice");
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, options.device), path + ": device properties");
  if (prop.major != 9 || prop.minor != 0)
    return failedPrecondition(path + ": GPU " + std::to_string(options.device) +
                              " (" + prop.name + ") is sm_" +
                              std::to_string(prop.major) +
                              std::to_string(prop.minor) +
                              "; the CUDA backend is built for sm_90a (Hopper)");

  // A cpu-target plan uses the same txk ops and runs here too (the tests
  // compare the two); a plan for another GPU generation does not.
  const std::string &target = message.options().target();
  if (!target.empty() && target != "cpu" && target != "sm_90a")
    return failedPrecondition(path + ": compiled for target '" + target +
                              "'; the CUDA backend runs sm_90a (or cpu) plans: recompile "
                              "with txc compile --target sm_90a");
  if (message.plans_size() == 0)
    return invalidArgument(path + ": the artifact has no plan");
  if (message.plans_size() > 1 || message.options().tensor_parallel() > 1)
    return unimplemented(path + ": compiled for tensor_parallel " +
                         std::to_string(message.plans_size()) +
                         "; the CUDA backend runs one GPU (tp 1) so far");
  if (artifact->weights().size() != static_cast<size_t>(message.weights_size()))
    return failedPrecondition(path + ": weights are not bound (load the "
                              "artifact with bind_weights)");
  vocab_size = static_cast<int32_t>(message.config().vocab_size());
  if (vocab_size <= 0)
    return invalidArgument(path + ": config.vocab_size must be positive");
  plan = &message.plans(0);

  CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), path + ": stream");
  CU(cudaEventCreate(&step_start), path + ": event");
  if (profile) {
    launch_events.resize(static_cast<size_t>(plan->launches_size()) + 1);
    for (cudaEvent_t &event : launch_events)
      CU(cudaEventCreate(&event), path + ": event");
  }
  CU(cudaEventCreate(&step_end), path + ": event");
  TXC_RETURN_IF_ERROR(cublasStatus(cublasLtCreate(&lt), path + ": cublasLtCreate"));

  const pb::CompileOptions &compile = message.options();
  page_size = static_cast<int32_t>(compile.kv_page_size() > 0 ? compile.kv_page_size() : 16);
  if (compile.max_num_seqs() > 0)
    max_num_seqs = compile.max_num_seqs();

  // Check the launches; collect KV geometry, rotary tables, scratch needs.
  std::map<int32_t, std::pair<int64_t, int64_t>> geometry;
  uint64_t gemm_scratch_need = 0;
  for (int i = 0; i < plan->launches_size(); ++i) {
    const pb::Launch &launch = plan->launches(i);
    std::string context = path + ": " + describeLaunch(i, launch);
    if (launch.op() == "txk.all_reduce")
      return unimplemented(context + ": all_reduce needs tensor parallelism, "
                           "which the CUDA backend does not run yet");
    if (!knownOps().count(launch.op()))
      return unimplemented(context + ": unknown op for the CUDA backend");
    LaunchAttributes attributes(launch);
    if (launch.op() == "txk.gemm" || launch.op() == "txk.gemm_rope_append") {
      // Intermediate fp32 [rows, weight rows] at most.
      if (launch.results_size() > 0 && launch.operands_size() > 1 &&
          launch.operands(1).ref_case() == pb::ValueRef::kWeightIndex) {
        const auto &w = artifact->weights()[launch.operands(1).weight_index()];
        int64_t n = w.shape.empty() ? 0 : w.shape[0];
        int64_t rows = compile.max_batch_tokens() > 0 ? compile.max_batch_tokens() : 8192;
        const pb::ValueRef &result = launch.results(0);
        if (result.ref_case() == pb::ValueRef::kArena && result.arena().shape_size() == 2) {
          DType dt = artifact::fromProtoDType(result.arena().dtype());
          int64_t cols = result.arena().shape(1);
          if (cols > 0 && dtypeSize(dt) > 0)
            rows = static_cast<int64_t>(result.arena().bytes() / (cols * dtypeSize(dt)));
        }
        gemm_scratch_need = std::max<uint64_t>(gemm_scratch_need,
                                               static_cast<uint64_t>(rows * n) * 4);
      }
    }
    if (!usesKvCache(launch.op()))
      continue;
    StatusOr<int64_t> layer = attributes.getInt("layer");
    StatusOr<int64_t> kv_heads = attributes.getInt("num_kv_heads");
    StatusOr<int64_t> head_dim = attributes.getInt("head_dim");
    StatusOr<int64_t> heads = attributes.getInt("num_heads");
    for (const Status &status :
         {layer.status(), kv_heads.status(), head_dim.status(), heads.status()})
      TXC_RETURN_IF_ERROR(withContext(context, status));
    if (*layer < 0 || *kv_heads <= 0 || *head_dim <= 0 || *heads <= 0)
      return invalidArgument(context + ": layer, num_heads, num_kv_heads and "
                             "head_dim must be non-negative / positive");
    max_heads = std::max(max_heads, *heads);
    max_kv_heads = std::max(max_kv_heads, *kv_heads);
    max_head_dim = std::max(max_head_dim, *head_dim);
    auto &g = geometry[static_cast<int32_t>(*layer)];
    if (g.first == 0) {
      g = {*kv_heads, *head_dim};
    } else if (g.first != *kv_heads || g.second != *head_dim) {
      return invalidArgument(context + ": layer " + std::to_string(*layer) +
                             " was used with " + std::to_string(g.first) +
                             " KV heads of " + std::to_string(g.second) +
                             " by an earlier launch");
    }
    if (launch.op() != "txk.attention") {
      if (*head_dim > 512)
        return unimplemented(context + ": head_dim " + std::to_string(*head_dim) +
                             " is above the rope kernel's 512");
      StatusOr<cpu::RopeParams> rope = attributes.getRope();
      TXC_RETURN_IF_ERROR(withContext(context, rope.status()));
      TXC_RETURN_IF_ERROR(withContext(context, cpu::validateRopeParams(*rope, *head_dim)));
      if (rope->scaling == cpu::RopeScaling::kDynamic)
        return unimplemented(context + ": dynamic rotary scaling is not "
                             "supported by the CUDA backend yet");
      cpu::RotaryFrequencies f = cpu::computeRotaryFrequencies(*rope, *head_dim, 0);
      RopeTable table;
      table.half = static_cast<int64_t>(f.inv_freq.size());
      table.attention_scaling = f.attention_scaling;
      TXC_ASSIGN_OR_RETURN(void *p, allocate(f.inv_freq.size() * 4, "rotary table"));
      table.inv_freq = static_cast<float *>(p);
      CU(cudaMemcpy(p, f.inv_freq.data(), f.inv_freq.size() * 4,
                    cudaMemcpyHostToDevice), context + ": rotary upload");
      rope_tables[i] = table;
    }
  }
  if (options.use_gemv && options.fuse_norms)
    fusable_norms = fusableNorms(*plan);
  bool writes_logits = false;
  for (const pb::Launch &launch : plan->launches())
    for (const pb::ValueRef &result : launch.results())
      if (result.ref_case() == pb::ValueRef::kStepInput &&
          result.step_input().kind() == pb::STEP_INPUT_LOGITS)
        writes_logits = true;
  if (!writes_logits)
    return invalidArgument(path + ": no launch of the plan writes the logits "
                           "(a result that is STEP_INPUT_LOGITS)");

  // Weights: uploaded once.
  weights.resize(artifact->weights().size());
  for (size_t w = 0; w < artifact->weights().size(); ++w) {
    const artifact::BoundWeight &weight = artifact->weights()[w];
    uint64_t bytes = dtypeSize(weight.dtype);
    for (int64_t d : weight.shape)
      bytes *= static_cast<uint64_t>(d);
    TXC_ASSIGN_OR_RETURN(weights[w], allocate(bytes, "weight '" + weight.entry->name() + "'"));
    CU(cudaMemcpy(weights[w], weight.data, bytes, cudaMemcpyHostToDevice),
       path + ": uploading weight '" + weight.entry->name() + "'");
  }

  arena_bytes = plan->arena_bytes();
  TXC_ASSIGN_OR_RETURN(void *arena_p, allocate(arena_bytes, "the arena"));
  arena = static_cast<unsigned char *>(arena_p);
  gemm_scratch_bytes = std::max<uint64_t>(gemm_scratch_need, 1 << 20);
  TXC_ASSIGN_OR_RETURN(void *gs, allocate(gemm_scratch_bytes, "GEMM scratch"));
  gemm_scratch = static_cast<unsigned char *>(gs);
  copy_scratch_bytes = 3 * arena_bytes + (1 << 20);
  TXC_ASSIGN_OR_RETURN(void *cs, allocate(copy_scratch_bytes, "copy scratch"));
  copy_scratch = static_cast<unsigned char *>(cs);
  TXC_ASSIGN_OR_RETURN(cublas_workspace, allocate(kCublasWorkspaceBytes, "cuBLASLt workspace"));

  // The cache.
  cache_dtype = artifact::fromProtoDType(compile.kv_cache_dtype());
  if (cache_dtype == DType::kInvalid)
    cache_dtype = artifact::fromProtoDType(compile.activation_dtype());
  if (cache_dtype == DType::kInvalid)
    cache_dtype = DType::kF32;
  TXC_RETURN_IF_ERROR(withContext(path, etype(cache_dtype, "the KV cache").status()));
  uint64_t bytes_per_page = 0;
  for (const auto &[layer, g] : geometry)
    bytes_per_page += static_cast<uint64_t>(2 * page_size * g.first * g.second) *
                      dtypeSize(cache_dtype);
  int64_t max_seq_len = compile.max_seq_len() > 0 ? compile.max_seq_len() : 4096;
  int64_t useful_pages = max_num_seqs * ((max_seq_len + page_size - 1) / page_size);
  if (options.num_kv_pages > 0) {
    num_pages = options.num_kv_pages;
  } else if (bytes_per_page == 0) {
    num_pages = static_cast<int32_t>(std::min<int64_t>(useful_pages, 1 << 20));
  } else {
    uint64_t fit = options.kv_cache_budget_bytes / bytes_per_page;
    if (fit == 0)
      return resourceExhausted(path + ": the KV cache budget of " +
                               std::to_string(options.kv_cache_budget_bytes) +
                               " bytes does not hold one page (" +
                               std::to_string(bytes_per_page) + " bytes over all layers)");
    num_pages = static_cast<int32_t>(std::min<uint64_t>(
        {fit, static_cast<uint64_t>(useful_pages), uint64_t{1} << 30}));
  }
  for (const auto &[layer, g] : geometry) {
    uint64_t bytes = static_cast<uint64_t>(num_pages) * 2 * page_size * g.first *
                     g.second * dtypeSize(cache_dtype);
    TXC_ASSIGN_OR_RETURN(void *p, allocate(bytes, "the KV cache of layer " +
                                                      std::to_string(layer)));
    CU(cudaMemset(p, 0, bytes), path + ": clearing the KV cache");
    caches[layer] = {p, g.first, g.second};
  }
  if (max_heads > 0) {
    kernels::DecodeWorkspaceLayout layout = kernels::decodeWorkspaceLayout(
        static_cast<int>(max_num_seqs), static_cast<int>(max_heads),
        static_cast<int>(max_kv_heads), static_cast<int>(max_head_dim),
        kMaxDecodeSplits);
    decode_workspace_bytes = layout.total_bytes;
    TXC_ASSIGN_OR_RETURN(void *dw, allocate(decode_workspace_bytes, "decode workspace"));
    decode_workspace = static_cast<unsigned char *>(dw);
    uint64_t counter_bytes = static_cast<uint64_t>(max_num_seqs * max_kv_heads) * 4;
    TXC_ASSIGN_OR_RETURN(void *sc, allocate(counter_bytes, "split counters"));
    split_counters = static_cast<unsigned *>(sc);
    CU(cudaMemset(sc, 0, counter_bytes), path + ": clearing split counters");
  }
  device_logits_rows = max_num_seqs;
  TXC_ASSIGN_OR_RETURN(void *dl, allocate(static_cast<uint64_t>(device_logits_rows) *
                                              vocab_size * 4, "the logits"));
  device_logits = static_cast<float *>(dl);
  TXC_ASSIGN_OR_RETURN(void *dt, allocate(static_cast<uint64_t>(max_num_seqs) * 4,
                                          "sampled tokens"));
  device_tokens = static_cast<int32_t *>(dt);
  CU(cudaMallocHost(&host_tokens, static_cast<size_t>(max_num_seqs) * 4),
     path + ": pinned sampled tokens");
  if (options.device_sampling) {
    size_t sampling_bytes = static_cast<size_t>(max_num_seqs) * sizeof(engine::RowSampling);
    TXC_ASSIGN_OR_RETURN(void *ds, allocate(sampling_bytes, "sampling parameters"));
    device_row_sampling = static_cast<engine::RowSampling *>(ds);
    CU(cudaMallocHost(&host_row_sampling, sampling_bytes), path + ": pinned sampling parameters");
    sampling_workspace_bytes = samplingWorkspaceBytes(vocab_size);
    TXC_ASSIGN_OR_RETURN(sampling_workspace,
                         allocate(sampling_workspace_bytes, "the sampling workspace"));
  }

  // Graphs capture the step inputs' device addresses, so the input buffer
  // is sized once for the largest step the plan takes and never moves.
  int64_t max_tokens = compile.max_batch_tokens() > 0 ? compile.max_batch_tokens() : 8192;
  int64_t pages_per_seq = (max_seq_len + page_size - 1) / page_size;
  graph_max_batch = options.use_cuda_graphs && !profile
                        ? static_cast<int32_t>(std::min<int64_t>(max_num_seqs, max_tokens))
                        : 0;
  engine::Batch largest;
  largest.token_ids.resize(static_cast<size_t>(max_tokens));
  largest.positions = largest.slot_mapping = largest.token_ids;
  largest.query_start_offsets.resize(static_cast<size_t>(max_num_seqs) + 1);
  largest.context_lens.resize(static_cast<size_t>(max_num_seqs));
  largest.block_tables.resize(static_cast<size_t>(max_num_seqs * pages_per_seq));
  TXC_RETURN_IF_ERROR(uploadInputs(largest));
  CU(cudaDeviceSynchronize(), path + ": setting up the GPU");
  return Status::ok();
}

// --- binding ---------------------------------------------------------------

StatusOr<Bound> CudaExecutor::State::bindOperand(const pb::Launch &launch, int i,
                                                 bool required) {
  Bound bound;
  if (i >= launch.operands_size() ||
      launch.operands(i).ref_case() == pb::ValueRef::REF_NOT_SET) {
    if (required)
      return invalidArgument("operand " + std::to_string(i) + " is missing");
    return bound;
  }
  const pb::ValueRef &ref = launch.operands(i);
  switch (ref.ref_case()) {
  case pb::ValueRef::kArena: {
    const pb::ArenaSlot &slot = ref.arena();
    TXC_ASSIGN_OR_RETURN(MatrixShape shape,
                         arenaOperandShape(slot, rows_at_offset, i, arena_bytes));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {arena + slot.offset(), shape.dtype, shape.rows, shape.cols};
    return bound;
  }
  case pb::ValueRef::kWeightIndex: {
    TXC_ASSIGN_OR_RETURN(MatrixShape shape, weightOperandShape(*artifact, ref.weight_index(), i));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {weights[ref.weight_index()], shape.dtype, shape.rows, shape.cols};
    return bound;
  }
  case pb::ValueRef::kStepInput:
    switch (ref.step_input().kind()) {
    case pb::STEP_INPUT_TOKEN_IDS:
      bound.kind = Bound::Kind::kTokenIds;
      return bound;
    case pb::STEP_INPUT_POSITIONS:
      bound.kind = Bound::Kind::kPositions;
      return bound;
    case pb::STEP_INPUT_BATCH:
      bound.kind = Bound::Kind::kBatch;
      return bound;
    case pb::STEP_INPUT_KV_CACHE:
      if (!caches.count(ref.step_input().layer()))
        return invalidArgument("operand " + std::to_string(i) +
                               " is the KV cache of layer " +
                               std::to_string(ref.step_input().layer()) +
                               ", which no launch's layer attribute names");
      bound.kind = Bound::Kind::kCache;
      bound.layer = ref.step_input().layer();
      return bound;
    default:
      return unimplemented("operand " + std::to_string(i) + " is step input " +
                           pb::StepInputKind_Name(ref.step_input().kind()) +
                           ", which no txk op takes on the GPU");
    }
  default:
    return invalidArgument("operand " + std::to_string(i) + " is empty");
  }
}

StatusOr<DMatrix> CudaExecutor::State::floatOperand(const pb::Launch &launch,
                                                    int i, bool required) {
  TXC_ASSIGN_OR_RETURN(Bound bound, bindOperand(launch, i, required));
  if (bound.kind == Bound::Kind::kAbsent)
    return DMatrix{};
  if (bound.kind != Bound::Kind::kMatrix)
    return invalidArgument("operand " + std::to_string(i) +
                           " must be a tensor (arena value or weight)");
  TXC_RETURN_IF_ERROR(etype(bound.matrix.dtype, "operand " + std::to_string(i)).status());
  return bound.matrix;
}

StatusOr<DMatrix> CudaExecutor::State::bindResult(const pb::Launch &launch, int i,
                                                  int64_t rows) {
  if (i >= launch.results_size())
    return invalidArgument("result " + std::to_string(i) + " is missing");
  const pb::ValueRef &ref = launch.results(i);
  if (ref.ref_case() == pb::ValueRef::kStepInput &&
      ref.step_input().kind() == pb::STEP_INPUT_LOGITS) {
    if (rows != batch->numSequences())
      return invalidArgument("the logits have " + std::to_string(rows) +
                             " rows, one per sequence (" +
                             std::to_string(batch->numSequences()) + ") expected");
    wrote_logits = true;
    return DMatrix{device_logits, DType::kF32, rows, vocab_size};
  }
  if (ref.ref_case() != pb::ValueRef::kArena)
    return invalidArgument("result " + std::to_string(i) +
                           " must be an arena slot or the logits");
  const pb::ArenaSlot &slot = ref.arena();
  if (slot.shape_size() != 2)
    return invalidArgument("result " + std::to_string(i) + " must be 2-D");
  if (slot.shape(0) != -1 && slot.shape(0) != rows)
    return invalidArgument("result " + std::to_string(i) + " has " +
                           std::to_string(slot.shape(0)) + " rows, the op makes " +
                           std::to_string(rows));
  int64_t cols = slot.shape(1);
  DType dtype = artifact::fromProtoDType(slot.dtype());
  TXC_RETURN_IF_ERROR(etype(dtype, "result " + std::to_string(i)).status());
  uint64_t bytes = static_cast<uint64_t>(rows * cols) * dtypeSize(dtype);
  if (bytes > slot.bytes() || slot.offset() + bytes > arena_bytes)
    return outOfRange("result " + std::to_string(i) + " of " +
                      shapeString(rows, cols) + " (" + std::to_string(bytes) +
                      " bytes) does not fit its arena slot of " +
                      std::to_string(slot.bytes()) +
                      " bytes: the batch exceeds what the plan was compiled for");
  rows_at_offset[slot.offset()] = rows;
  return DMatrix{arena + slot.offset(), dtype, rows, cols};
}

StatusOr<DMatrix> CudaExecutor::State::copyToScratch(const DMatrix &input) {
  uint64_t bytes = (input.bytes() + 255) / 256 * 256;
  if (copy_scratch_used + bytes > copy_scratch_bytes)
    return resourceExhausted("copy scratch of " + std::to_string(copy_scratch_bytes) +
                             " bytes is too small");
  DMatrix copy = input;
  copy.data = copy_scratch + copy_scratch_used;
  copy_scratch_used += bytes;
  CU(cudaMemcpyAsync(copy.data, input.data, input.bytes(),
                     cudaMemcpyDeviceToDevice, stream), "copying an aliased input");
  return copy;
}

// Inputs sharing bytes with a result are copied first, unless they are the
// exact same rows (row-wise kernels read a row completely before writing it).
Status CudaExecutor::State::unalias(std::vector<DMatrix *> inputs,
                                    std::vector<DMatrix> results) {
  for (DMatrix *input : inputs) {
    if (!input->present())
      continue;
    bool aliased = false;
    for (const DMatrix &result : results)
      if (overlaps(input->data, input->bytes(), result.data, result.bytes()) &&
          !(input->data == result.data && input->cols == result.cols &&
            input->dtype == result.dtype))
        aliased = true;
    if (aliased) {
      TXC_ASSIGN_OR_RETURN(*input, copyToScratch(*input));
    }
  }
  return Status::ok();
}

// out = input @ weight^T (+ bias) (+ residual), fp32 accumulation. Row-major
// out[M, N] is column-major out^T = weight (K x N, transposed) * input^T.
Status CudaExecutor::State::gemm(const DMatrix &input, const DMatrix &weight,
                                 const DMatrix &bias, const DMatrix &residual,
                                 const DMatrix &out) {
  int64_t m = input.rows, k = input.cols, n = weight.rows;
  if (weight.cols != k)
    return invalidArgument("gemm input " + shapeString(m, k) + " and weight " +
                           shapeString(weight.rows, weight.cols) + " disagree on K");
  if (out.rows != m || out.cols != n)
    return invalidArgument("gemm result " + shapeString(out.rows, out.cols) +
                           " must be " + shapeString(m, n));
  if (input.dtype != weight.dtype)
    return unimplemented(std::string("gemm of a ") + std::string(dtypeName(input.dtype)) +
                         " input by a " + std::string(dtypeName(weight.dtype)) +
                         " weight: cuBLASLt needs one operand type");
  if (residual.present() && (residual.dtype != out.dtype || residual.rows != m ||
                             residual.cols != n))
    return unimplemented("gemm residual must have the result's shape and dtype");
  if (bias.present() && bias.rows * bias.cols != n)
    return invalidArgument("gemm bias must have " + std::to_string(n) + " elements");
  TXC_ASSIGN_OR_RETURN(bool done, tryGemv(input, weight, bias, residual,
                                          residual.present() ? GemvEpilogue::kResidualAdd
                                                             : GemvEpilogue::kNone,
                                          out));
  if (done)
    return Status::ok();
  TXC_RETURN_IF_ERROR(flushPendingNorm());
  GemmPlanKey key{m, n, k, static_cast<int>(weight.dtype),
                  static_cast<int>(input.dtype),
                  residual.present() ? 1 : 0, static_cast<int>(out.dtype),
                  bias.present() ? static_cast<int>(bias.dtype) : -1};
  auto it = gemm_plans.find(key);
  if (it == gemm_plans.end()) {
    GemmPlan p;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    TXC_RETURN_IF_ERROR(cublasStatus(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F), "matmul desc"));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    if (bias.present()) {
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
      cudaDataType_t bt = cudaType(bias.dtype);
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
    }
    cublasLtMatrixLayoutCreate(&p.a, cudaType(weight.dtype), k, n, k);
    cublasLtMatrixLayoutCreate(&p.b, cudaType(input.dtype), k, m, k);
    cublasLtMatrixLayoutCreate(&p.c, cudaType(out.dtype), n, m, n);
    cublasLtMatrixLayoutCreate(&p.d, cudaType(out.dtype), n, m, n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t ws = kCublasWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.d,
                                                           pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatmulDescDestroy(p.op);
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c, p.d})
        cublasLtMatrixLayoutDestroy(l);
      return unimplemented("cuBLASLt has no algorithm for " + shapeString(m, k) +
                           " x " + shapeString(n, k) + "^T in " +
                           std::string(dtypeName(input.dtype)) + " -> " +
                           std::string(dtypeName(out.dtype)) +
                           (bias.present() ? " with bias" : ""));
    }
    p.algo = result.algo;
    it = gemm_plans.emplace(key, p).first;
  }
  GemmPlan &p = it->second;
  if (bias.present())
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.data,
                                   sizeof(bias.data));
  float alpha = 1.0f, beta = residual.present() ? 1.0f : 0.0f;
  const void *c = residual.present() ? residual.data : out.data;
  return cublasStatus(cublasLtMatmul(lt, p.op, &alpha, weight.data, p.a, input.data, p.b,
                                     &beta, c, p.c, out.data, p.d, &p.algo,
                                     cublas_workspace, kCublasWorkspaceBytes, stream),
                      "cublasLtMatmul " + shapeString(m, k) + " x " + shapeString(n, k) + "^T");
}

// The decode-sized GEMMs (m <= kGemvMaxRows, 16-bit, one dtype throughout)
// run on Gemv.cu with the epilogue fused; false leaves the GEMM to cuBLASLt.
StatusOr<bool> CudaExecutor::State::tryGemv(const DMatrix &input, const DMatrix &weight,
                                            const DMatrix &bias, const DMatrix &residual,
                                            GemvEpilogue epilogue, const DMatrix &out) {
  if (!options.use_gemv || input.dtype != weight.dtype ||
      (residual.present() && residual.dtype != out.dtype))
    return false;
  GemvArgs g;
  g.x = input.data;
  const PendingNorm &norm = pending_norm;
  if (norm.active) {
    // The input is the deferred norm's result: read the norm's input instead.
    if (norm.out.data != input.data || norm.input.dtype != input.dtype ||
        norm.input.cols != input.cols ||
        overlaps(norm.input.data, norm.input.bytes(), out.data, out.bytes()))
      return false;
    g.x = norm.input.data;
    g.norm_weight = norm.weight.data;
    TXC_ASSIGN_OR_RETURN(g.norm_type, etype(norm.weight.dtype, "the norm weight"));
    g.norm_eps = norm.eps;
  }
  g.w = weight.data;
  g.bias = bias.data;
  if (bias.present()) {
    TXC_ASSIGN_OR_RETURN(g.bias_type, etype(bias.dtype, "the bias"));
  }
  g.residual = residual.data;
  g.out = out.data;
  TXC_ASSIGN_OR_RETURN(g.type, etype(input.dtype, "the gemm input"));
  TXC_ASSIGN_OR_RETURN(g.out_type, etype(out.dtype, "the gemm result"));
  g.m = input.rows;
  g.n = weight.rows;
  g.k = input.cols;
  g.epilogue = epilogue;
  g.pdl = options.use_pdl;
  if (!gemvSupports(g))
    return false;
  TXC_RETURN_IF_ERROR(cudaStatus(launchGemv(g, stream), "gemv launch"));
  pending_norm.active = false;
  return true;
}

Status CudaExecutor::State::launchNorm(const DMatrix &input, const DMatrix *residual,
                                       const DMatrix &weight, float eps, const DMatrix *sum,
                                       const DMatrix &out) {
  TXC_ASSIGN_OR_RETURN(EType it, etype(input.dtype, "the input"));
  TXC_ASSIGN_OR_RETURN(EType wt, etype(weight.dtype, "the weight"));
  TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
  EType rt = EType::kF32, st = EType::kF32;
  if (residual) {
    TXC_ASSIGN_OR_RETURN(rt, etype(residual->dtype, "the residual"));
  }
  if (sum) {
    TXC_ASSIGN_OR_RETURN(st, etype(sum->dtype, "the sum"));
  }
  return cudaStatus(launchRmsNorm(input.data, it, residual ? residual->data : nullptr, rt,
                                  weight.data, wt, weight.rows * weight.cols, input.rows,
                                  input.cols, eps, sum ? sum->data : nullptr, st, out.data,
                                  ot, stream, options.use_pdl),
                    "kernel launch");
}

// A deferred norm whose GEMM did not take it runs now, before the GEMM.
Status CudaExecutor::State::flushPendingNorm() {
  if (!pending_norm.active)
    return Status::ok();
  pending_norm.active = false;
  return launchNorm(pending_norm.input, nullptr, pending_norm.weight, pending_norm.eps,
                    nullptr, pending_norm.out);
}

Status CudaExecutor::State::attention(const LaunchAttributes &attributes,
                                      const DMatrix &query, const LayerCache &cache,
                                      const DMatrix &out) {
  TXC_ASSIGN_OR_RETURN(int64_t heads, attributes.getInt("num_heads"));
  TXC_ASSIGN_OR_RETURN(int64_t kv_heads, attributes.getInt("num_kv_heads"));
  TXC_ASSIGN_OR_RETURN(int64_t head_dim, attributes.getInt("head_dim"));
  TXC_ASSIGN_OR_RETURN(double scale, attributes.getFloat("scale"));
  bool causal = attributes.getFlag("causal");
  int64_t window = attributes.getIntOr("sliding_window", 0);
  double softcap = attributes.getFloatOr("logit_softcap", 0.0);
  if (heads % kv_heads != 0)
    return invalidArgument("num_heads must be a multiple of num_kv_heads");
  if (query.cols != heads * head_dim || query.rows != batch->numTokens())
    return invalidArgument("attention query " + shapeString(query.rows, query.cols) +
                           " must be " + shapeString(batch->numTokens(), heads * head_dim));
  if (out.rows != query.rows || out.cols != query.cols)
    return invalidArgument("attention result must match the query");
  if (cache.kv_heads != kv_heads || cache.head_dim != head_dim)
    return invalidArgument("KV cache layer holds " + std::to_string(cache.kv_heads) +
                           " heads of " + std::to_string(cache.head_dim));
  int32_t seqs = batch->numSequences(), tokens = batch->numTokens();

  bool library = options.use_attention_library &&
                 (cache_dtype == DType::kBF16 || cache_dtype == DType::kF16) &&
                 query.dtype == cache_dtype && out.dtype == cache_dtype &&
                 (page_size & (page_size - 1)) == 0;
  if (library) {
    kernels::AttentionConfig config;
    config.dtype = cache_dtype == DType::kBF16 ? kernels::ElementType::kBf16
                                               : kernels::ElementType::kFp16;
    config.head_dim = static_cast<int>(head_dim);
    config.causal = causal;
    kernels::KVCacheView kv;
    int64_t kv_cols = kv_heads * head_dim;
    int64_t elem = dtypeSize(cache_dtype);
    kv.k = cache.data;
    kv.v = static_cast<unsigned char *>(cache.data) + page_size * kv_cols * elem;
    kv.page_table = d_tables;
    kv.page_table_stride = batch->max_pages_per_seq;
    kv.page_stride = 2 * page_size * kv_cols;
    kv.head_stride = head_dim;
    kv.token_stride = kv_cols;
    kv.page_size = page_size;
    kv.page_size_log2 = 0;
    while ((1 << kv.page_size_log2) < page_size)
      ++kv.page_size_log2;
    kernels::VariantParams variant;
    variant.sm_scale = static_cast<float>(scale);
    variant.sm_scale_log2 = static_cast<float>(scale * 1.4426950408889634);
    variant.softcap = static_cast<float>(softcap);
    variant.window_left = window > 0 ? static_cast<int>(window - 1) : -1;
    kernels::Status status;
    if (tokens == seqs) { // every sequence has one new token: decode
      kernels::DecodeParams p;
      p.q = query.data;
      p.q_batch_stride = query.cols;
      p.q_head_stride = head_dim;
      p.o = out.data;
      p.o_batch_stride = out.cols;
      p.o_head_stride = head_dim;
      p.kv = kv;
      p.kv_lens = d_context;
      p.batch = seqs;
      p.num_qo_heads = static_cast<int>(heads);
      p.num_kv_heads = static_cast<int>(kv_heads);
      p.variant = variant;
      int splits = 1;
      // At most kMaxDecodeSplits (the workspace), so chunks of 32 tokens
      // (two pages) only matter below 1k tokens of context, where one CTA
      // per KV head would walk the whole context alone.
      status = kernels::planDecodeSplits(config, seqs, p.num_qo_heads, p.num_kv_heads,
                                         graph_context > 0 ? graph_context : max_context,
                                         &splits, 32, kMaxDecodeSplits);
      if (status.isOk()) {
        splits = std::max(1, std::min(splits, kMaxDecodeSplits));
        if (seqs > max_num_seqs)
          splits = 1;
        if (splits > 1) {
          kernels::DecodeWorkspaceLayout layout = kernels::decodeWorkspaceLayout(
              seqs, p.num_qo_heads, p.num_kv_heads, static_cast<int>(head_dim), splits);
          if (layout.total_bytes > decode_workspace_bytes) {
            splits = 1;
          } else {
            p.maybe_partial_o = reinterpret_cast<float *>(decode_workspace + layout.partial_o_offset);
            p.maybe_partial_lse = reinterpret_cast<float *>(decode_workspace + layout.partial_lse_offset);
            p.maybe_split_counters = split_counters;
          }
        }
        p.num_splits = splits;
        status = kernels::launchPagedDecode(config, p, stream);
      }
    } else {
      kernels::PrefillParams p;
      p.q = query.data;
      p.q_token_stride = query.cols;
      p.q_head_stride = head_dim;
      p.o = out.data;
      p.o_token_stride = out.cols;
      p.o_head_stride = head_dim;
      p.kv = kv;
      p.cu_seqlens_q = d_qso;
      p.maybe_kv_lens = d_context;
      p.batch = seqs;
      p.num_qo_heads = static_cast<int>(heads);
      p.num_kv_heads = static_cast<int>(kv_heads);
      p.max_seqlen_q = max_new_tokens;
      p.variant = variant;
      status = kernels::launchPrefill(config, p, stream);
    }
    if (status.isOk())
      return Status::ok();
    if (status.code() != kernels::StatusCode::kUnsupported)
      return internalError("attention kernel: " + status.message());
    // Unsupported variant: the simple kernel below.
  }
  SimpleAttentionArgs a;
  TXC_ASSIGN_OR_RETURN(a.q_type, etype(query.dtype, "the query"));
  TXC_ASSIGN_OR_RETURN(a.cache_type, etype(cache_dtype, "the cache"));
  TXC_ASSIGN_OR_RETURN(a.out_type, etype(out.dtype, "the result"));
  if (head_dim > 512)
    return unimplemented("head_dim " + std::to_string(head_dim) +
                         " is above the simple attention kernel's 512");
  a.q = query.data;
  a.cache = cache.data;
  a.page_size = page_size;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.heads = heads;
  a.query_start_offsets = d_qso;
  a.context_lens = d_context;
  a.block_tables = d_tables;
  a.max_pages_per_seq = batch->max_pages_per_seq;
  a.num_seqs = seqs;
  a.num_tokens = tokens;
  a.scale = static_cast<float>(scale);
  a.softcap = static_cast<float>(softcap);
  a.causal = causal;
  a.sliding_window = window;
  a.out = out.data;
  return cudaStatus(launchSimpleAttention(a, stream), "simple attention kernel");
}

// --- running ---------------------------------------------------------------

Status CudaExecutor::State::runLaunch(int index, const pb::Launch &launch) {
  const std::string &op = launch.op();
  LaunchAttributes attributes(launch);
  copy_scratch_used = 0;
  const std::string kernel = "kernel launch";
  if (op != "txk.gemm" && op != "txk.gemm_rope_append")
    TXC_RETURN_IF_ERROR(flushPendingNorm());

  if (op == "txk.embedding") {
    TXC_ASSIGN_OR_RETURN(Bound tokens, bindOperand(launch, 0, true));
    if (tokens.kind != Bound::Kind::kTokenIds)
      return invalidArgument("operand 0 must be the token ids");
    TXC_ASSIGN_OR_RETURN(DMatrix table, floatOperand(launch, 1, true));
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, batch->numTokens()));
    if (out.cols != table.cols)
      return invalidArgument("embedding result has " + std::to_string(out.cols) +
                             " columns, the table " + std::to_string(table.cols));
    TXC_ASSIGN_OR_RETURN(EType tt, etype(table.dtype, "the table"));
    TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
    return cudaStatus(launchEmbedding(d_tokens, batch->numTokens(), table.data, tt,
                                      table.rows, table.cols,
                                      attributes.getIntOr("vocab_start", 0), out.data,
                                      ot, stream), kernel);
  }
  if (op == "txk.rms_norm" || op == "txk.add_rms_norm") {
    bool add = op == "txk.add_rms_norm";
    TXC_ASSIGN_OR_RETURN(DMatrix input, floatOperand(launch, 0, true));
    DMatrix residual;
    if (add) {
      TXC_ASSIGN_OR_RETURN(residual, floatOperand(launch, 1, true));
    }
    TXC_ASSIGN_OR_RETURN(DMatrix weight, floatOperand(launch, add ? 2 : 1, true));
    TXC_ASSIGN_OR_RETURN(double eps, attributes.getFloat("eps"));
    DMatrix sum;
    if (add) {
      TXC_ASSIGN_OR_RETURN(sum, bindResult(launch, 0, input.rows));
    }
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, add ? 1 : 0, input.rows));
    int64_t group = weight.rows * weight.cols;
    if (group <= 0 || input.cols % group != 0 || out.cols != input.cols)
      return invalidArgument("rms_norm weight of " + std::to_string(group) +
                             " elements does not divide rows of " +
                             std::to_string(input.cols));
    if (add && (residual.rows != input.rows || residual.cols != input.cols ||
                sum.cols != input.cols))
      return invalidArgument("add_rms_norm residual and sum must match the input");
    if (!add && fusable_norms.count(index) && input.rows <= kGemvMaxRows &&
        group == input.cols && !overlaps(input.data, input.bytes(), out.data, out.bytes())) {
      // The next launch's GEMV normalises in its prologue (or flushes this).
      pending_norm = {true, input, weight, out, static_cast<float>(eps)};
      return Status::ok();
    }
    std::vector<DMatrix> results = {out};
    if (add)
      results.push_back(sum);
    TXC_RETURN_IF_ERROR(unalias({&input, &residual}, results));
    return launchNorm(input, add ? &residual : nullptr, weight, static_cast<float>(eps),
                      add ? &sum : nullptr, out);
  }
  if (op == "txk.gemm") {
    TXC_ASSIGN_OR_RETURN(DMatrix input, floatOperand(launch, 0, true));
    TXC_ASSIGN_OR_RETURN(DMatrix weight, floatOperand(launch, 1, true));
    TXC_ASSIGN_OR_RETURN(DMatrix bias, floatOperand(launch, 2, false));
    TXC_ASSIGN_OR_RETURN(DMatrix residual, floatOperand(launch, 3, false));
    TXC_ASSIGN_OR_RETURN(cpu::GemmEpilogue epilogue,
                         cpu::parseGemmEpilogue(attributes.getStringOr("epilogue", "none")));
    if (epilogue == cpu::GemmEpilogue::kResidualAdd && !residual.present())
      return invalidArgument("epilogue residual_add needs operand 3 (residual)");
    if (epilogue != cpu::GemmEpilogue::kResidualAdd)
      residual = DMatrix{};
    if (epilogue == cpu::GemmEpilogue::kSwiglu) {
      if (weight.rows % 2 != 0)
        return invalidArgument("swiglu gemm needs an even number of weight rows");
      TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, input.rows));
      DMatrix acc{gemm_scratch, DType::kF32, input.rows, weight.rows};
      if (acc.bytes() > gemm_scratch_bytes)
        return resourceExhausted("GEMM scratch too small for " +
                                 shapeString(acc.rows, acc.cols));
      if (out.cols != weight.rows / 2)
        return invalidArgument("swiglu result must have weight rows / 2 columns");
      if (!overlaps(input.data, input.bytes(), out.data, out.bytes())) {
        TXC_ASSIGN_OR_RETURN(bool done, tryGemv(input, weight, bias, DMatrix{},
                                                GemvEpilogue::kSwiglu, out));
        if (done)
          return Status::ok();
      }
      // An fp32 GEMM output needs an fp32 bias in cuBLASLt's bias epilogue.
      TXC_RETURN_IF_ERROR(gemm(input, weight, bias, DMatrix{}, acc));
      TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
      return cudaStatus(launchSwiglu(static_cast<float *>(acc.data), acc.rows,
                                     weight.rows / 2, out.data, ot, stream), kernel);
    }
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, input.rows));
    if (residual.present() && residual.data != out.data &&
        overlaps(residual.data, residual.bytes(), out.data, out.bytes())) {
      TXC_ASSIGN_OR_RETURN(residual, copyToScratch(residual));
    }
    bool out_aliases = overlaps(input.data, input.bytes(), out.data, out.bytes()) ||
                       overlaps(bias.data, bias.bytes(), out.data, out.bytes());
    if (!out_aliases)
      return gemm(input, weight, bias, residual, out);
    DMatrix tmp{gemm_scratch, out.dtype, out.rows, out.cols};
    if (tmp.bytes() > gemm_scratch_bytes)
      return resourceExhausted("GEMM scratch too small");
    if (residual.present())
      CU(cudaMemcpyAsync(tmp.data, residual.data, residual.bytes(),
                         cudaMemcpyDeviceToDevice, stream), "residual copy");
    TXC_RETURN_IF_ERROR(gemm(input, weight, bias, residual.present() ? tmp : DMatrix{}, tmp));
    return cudaStatus(cudaMemcpyAsync(out.data, tmp.data, out.bytes(),
                                      cudaMemcpyDeviceToDevice, stream), "result copy");
  }
  if (op == "txk.rope_append" || op == "txk.gemm_rope_append") {
    bool fused = op == "txk.gemm_rope_append";
    int base = fused ? 2 : 0;
    RopeAppendArgs a;
    TXC_ASSIGN_OR_RETURN(a.heads, attributes.getInt("num_heads"));
    TXC_ASSIGN_OR_RETURN(a.kv_heads, attributes.getInt("num_kv_heads"));
    TXC_ASSIGN_OR_RETURN(a.head_dim, attributes.getInt("head_dim"));
    TXC_ASSIGN_OR_RETURN(Bound positions, bindOperand(launch, base + 1, true));
    TXC_ASSIGN_OR_RETURN(Bound cache, bindOperand(launch, base + 2, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(launch, base + 3, true));
    if (positions.kind != Bound::Kind::kPositions || cache.kind != Bound::Kind::kCache ||
        batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operands " + std::to_string(base + 1) + ".." +
                             std::to_string(base + 3) +
                             " must be positions, the KV cache and the batch");
    TXC_ASSIGN_OR_RETURN(DMatrix q_norm, floatOperand(launch, base + 4, false));
    TXC_ASSIGN_OR_RETURN(DMatrix k_norm, floatOperand(launch, base + 5, false));
    if (q_norm.present() || k_norm.present()) {
      TXC_ASSIGN_OR_RETURN(double eps, attributes.getFloat("norm_eps"));
      a.norm_eps = static_cast<float>(eps);
    }
    for (const DMatrix *norm : {&q_norm, &k_norm})
      if (norm->present() && norm->rows * norm->cols != a.head_dim)
        return invalidArgument("q_norm / k_norm weights must have head_dim elements");
    int64_t rows = batch->numTokens();
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, rows));
    DMatrix qkv;
    if (fused) {
      TXC_ASSIGN_OR_RETURN(DMatrix input, floatOperand(launch, 0, true));
      TXC_ASSIGN_OR_RETURN(DMatrix weight, floatOperand(launch, 1, true));
      TXC_ASSIGN_OR_RETURN(DMatrix bias, floatOperand(launch, 2, false));
      // QKV rounded to the result dtype, as the unfused pair computes.
      qkv = DMatrix{gemm_scratch, out.dtype, input.rows, weight.rows};
      if (qkv.bytes() > gemm_scratch_bytes)
        return resourceExhausted("GEMM scratch too small for QKV");
      TXC_RETURN_IF_ERROR(gemm(input, weight, bias, DMatrix{}, qkv));
    } else {
      TXC_ASSIGN_OR_RETURN(qkv, floatOperand(launch, 0, true));
      if (overlaps(qkv.data, qkv.bytes(), out.data, out.bytes())) {
        TXC_ASSIGN_OR_RETURN(qkv, copyToScratch(qkv));
      }
    }
    if (qkv.cols != (a.heads + 2 * a.kv_heads) * a.head_dim || qkv.rows != rows ||
        out.cols != a.heads * a.head_dim)
      return invalidArgument("qkv " + shapeString(qkv.rows, qkv.cols) + " / result " +
                             shapeString(out.rows, out.cols) +
                             " do not match the heads");
    const LayerCache &layer = caches.at(cache.layer);
    if (layer.kv_heads != a.kv_heads || layer.head_dim != a.head_dim)
      return invalidArgument("KV cache layer geometry differs from the launch");
    const RopeTable &table = rope_tables.at(index);
    a.qkv = qkv.data;
    TXC_ASSIGN_OR_RETURN(a.qkv_type, etype(qkv.dtype, "qkv"));
    a.positions = d_positions;
    a.slot_mapping = d_slots;
    a.num_tokens = rows;
    a.inv_freq = table.inv_freq;
    a.half = table.half;
    a.attention_scaling = table.attention_scaling;
    a.q_norm = q_norm.data;
    a.k_norm = k_norm.data;
    if (q_norm.present()) {
      TXC_ASSIGN_OR_RETURN(a.q_norm_type, etype(q_norm.dtype, "q_norm"));
    }
    if (k_norm.present()) {
      TXC_ASSIGN_OR_RETURN(a.k_norm_type, etype(k_norm.dtype, "k_norm"));
    }
    a.cache = layer.data;
    TXC_ASSIGN_OR_RETURN(a.cache_type, etype(cache_dtype, "the cache"));
    a.page_size = page_size;
    a.out = out.data;
    TXC_ASSIGN_OR_RETURN(a.out_type, etype(out.dtype, "the result"));
    a.pdl = options.use_pdl;
    return cudaStatus(launchRopeAppend(a, stream), kernel);
  }
  if (op == "txk.attention") {
    TXC_ASSIGN_OR_RETURN(DMatrix query, floatOperand(launch, 0, true));
    TXC_ASSIGN_OR_RETURN(Bound cache, bindOperand(launch, 1, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(launch, 2, true));
    if (cache.kind != Bound::Kind::kCache || batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operands 1 and 2 must be the KV cache and the batch");
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, query.rows));
    if (overlaps(query.data, query.bytes(), out.data, out.bytes())) {
      TXC_ASSIGN_OR_RETURN(query, copyToScratch(query));
    }
    return attention(attributes, query, caches.at(cache.layer), out);
  }
  if (op == "txk.gather_last") {
    TXC_ASSIGN_OR_RETURN(DMatrix input, floatOperand(launch, 0, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(launch, 1, true));
    if (batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operand 1 must be the batch");
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, 0, batch->numSequences()));
    if (out.cols != input.cols)
      return invalidArgument("gather_last result must have the input's columns");
    if (overlaps(input.data, input.bytes(), out.data, out.bytes())) {
      TXC_ASSIGN_OR_RETURN(input, copyToScratch(input));
    }
    TXC_ASSIGN_OR_RETURN(EType it, etype(input.dtype, "the input"));
    TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
    return cudaStatus(launchGatherLast(input.data, it, input.cols, d_qso,
                                       batch->numSequences(), out.data, ot, stream),
                      kernel);
  }
  return unimplemented("unknown op for the CUDA backend");
}

Status CudaExecutor::State::validateBatch(const engine::Batch &b) const {
  return cpu::validateBatch(b, path, vocab_size, num_pages, page_size);
}

// One pinned staging buffer, one host-to-device copy per step.
Status CudaExecutor::State::uploadInputs(const engine::Batch &b) {
  size_t t = b.token_ids.size(), s = b.context_lens.size();
  size_t need = 3 * t + (s + 1) + s + b.block_tables.size();
  if (need > inputs_capacity) {
    // Growing is rare; the previous step has already finished (execute
    // synchronises at its end), so the old buffers are free.
    if (host_inputs)
      cudaFreeHost(host_inputs);
    host_inputs = nullptr;
    for (auto &[key, graph] : decode_graphs) // they captured the old address
      cudaGraphExecDestroy(graph);
    decode_graphs.clear();
    size_t capacity = std::max<size_t>(need * 2, 4096);
    CU(cudaMallocHost(&host_inputs, capacity * 4), path + ": pinned step inputs");
    TXC_ASSIGN_OR_RETURN(void *d, allocate(capacity * 4, "step inputs"));
    device_inputs = static_cast<int32_t *>(d);
    inputs_capacity = capacity;
  }
  int32_t *h = host_inputs;
  size_t offset = 0;
  auto put = [&](const std::vector<int32_t> &v) {
    const int32_t *device = device_inputs + offset;
    std::memcpy(h + offset, v.data(), v.size() * 4);
    offset += v.size();
    return device;
  };
  d_tokens = put(b.token_ids);
  d_positions = put(b.positions);
  d_slots = put(b.slot_mapping);
  d_qso = put(b.query_start_offsets);
  d_context = put(b.context_lens);
  d_tables = put(b.block_tables);
  max_new_tokens = 0;
  max_context = 0;
  for (size_t i = 0; i < s; ++i) {
    max_new_tokens = std::max(max_new_tokens,
                              b.query_start_offsets[i + 1] - b.query_start_offsets[i]);
    max_context = std::max(max_context, b.context_lens[i]);
  }
  return cudaStatus(cudaMemcpyAsync(device_inputs, host_inputs, offset * 4,
                                    cudaMemcpyHostToDevice, stream),
                    path + ": copying the step inputs");
}

// --- the public class ------------------------------------------------------

CudaExecutor::CudaExecutor(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaExecutor::~CudaExecutor() = default;

StatusOr<std::unique_ptr<CudaExecutor>>
CudaExecutor::create(const artifact::LoadedArtifact &artifact,
                     const CudaExecutorOptions &options) {
  auto state = std::make_unique<State>();
  state->artifact = &artifact;
  state->options = options;
  state->profile = options.profile_launches;
  TXC_RETURN_IF_ERROR(state->prepare());
  if (options.warm_up)
    TXC_RETURN_IF_ERROR(state->warmUp());
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(state)));
}

int32_t CudaExecutor::vocabSize() const { return state_->vocab_size; }
int32_t CudaExecutor::numKvPages() const { return state_->num_pages; }
int32_t CudaExecutor::kvPageSize() const { return state_->page_size; }
float CudaExecutor::lastStepMs() const { return state_->last_step_ms; }

std::vector<LaunchProfileEntry> CudaExecutor::launchProfile() const {
  std::vector<LaunchProfileEntry> entries;
  for (const auto &[key, entry] : state_->profile_totals)
    entries.push_back(entry);
  return entries;
}

engine::EngineConfig CudaExecutor::engineConfig() const {
  const pb::Artifact &message = state_->artifact->message();
  const pb::CompileOptions &compile = message.options();
  engine::EngineConfig config;
  if (compile.max_batch_tokens() > 0)
    config.scheduler.max_batch_tokens = static_cast<int32_t>(compile.max_batch_tokens());
  if (compile.max_num_seqs() > 0)
    config.scheduler.max_num_seqs = static_cast<int32_t>(compile.max_num_seqs());
  if (compile.max_seq_len() > 0)
    config.scheduler.max_seq_len = static_cast<int32_t>(compile.max_seq_len());
  config.scheduler.page_size = state_->page_size;
  config.scheduler.num_pages = state_->num_pages;
  for (int64_t id : message.config().eos_token_ids())
    config.eos_token_ids.push_back(static_cast<int32_t>(id));
  return config;
}

// --- steps -------------------------------------------------------------------

// The first launch of every cuBLASLt and attention kernel loads its module
// (CUDA lazy loading) and the first GEMM of a shape asks cuBLASLt for an
// algorithm: measured, a process's first 2048-token prefill of the
// Qwen3-0.6B shape took 129 ms against 7.5 ms once warm. A server pays that
// at startup, not on its first request: run throwaway prefills of a few
// sizes and a decode step now. They write no cache slot (slot -1) and read
// page 0 only; their logits are discarded.
Status CudaExecutor::State::warmUp() {
  const pb::CompileOptions &compile = artifact->message().options();
  int32_t max_tokens = static_cast<int32_t>(
      compile.max_batch_tokens() > 0 ? compile.max_batch_tokens() : 2048);
  int32_t max_seq_len = static_cast<int32_t>(
      compile.max_seq_len() > 0 ? compile.max_seq_len() : 4096);
  int32_t pages_per_seq = (max_seq_len + page_size - 1) / page_size;
  for (int32_t tokens : {max_tokens, 128, 16, 1}) {
    tokens = std::min({tokens, max_tokens, max_seq_len});
    engine::Batch b;
    b.token_ids.assign(tokens, 0);
    b.positions.resize(tokens);
    for (int32_t t = 0; t < tokens; ++t)
      b.positions[t] = t;
    b.slot_mapping.assign(tokens, -1);
    b.query_start_offsets = {0, tokens};
    b.context_lens = {tokens};
    b.max_pages_per_seq = pages_per_seq;
    b.block_tables.assign(pages_per_seq, 0);
    b.logits_indices = {tokens - 1};
    b.request_ids = {0};
    b.num_prefill_tokens = tokens > 1 ? tokens : 0;
    TXC_RETURN_IF_ERROR(uploadInputs(b));
    Status status = enqueueLaunches(b);
    Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": warming up");
    batch = nullptr;
    TXC_RETURN_IF_ERROR(withContext("warm-up step of " + std::to_string(tokens) + " tokens",
                                    status));
    TXC_RETURN_IF_ERROR(sync);
  }
  profile_totals.clear();
  return Status::ok();
}

// Uploads the inputs and enqueues every launch of the plan for `b`.
Status CudaExecutor::State::enqueueLaunches(const engine::Batch &b) {
  batch = &b;
  rows_at_offset.clear();
  wrote_logits = false;
  pending_norm.active = false;
  Status status = Status::ok();
  // ~20 ms at 2 GHz, longer than enqueueing a step's launches takes.
  if (profile)
    status = cudaStatus(launchSpin(40'000'000, stream), path + ": profile spin");
  for (int i = 0; status.isOk() && i < plan->launches_size(); ++i) {
    const pb::Launch &launch = plan->launches(i);
    if (profile)
      cudaEventRecord(launch_events[i], stream);
    status = withContext(path + ": " + describeLaunch(i, launch), runLaunch(i, launch));
  }
  if (profile)
    cudaEventRecord(launch_events.back(), stream);
  if (status.isOk() && !wrote_logits)
    status = internalError(path + ": no launch wrote the logits this step");
  return status;
}

namespace {

/// The padded batch size a decode graph is captured for: powers of two up
/// to 32, then multiples of 32, capped at `largest`.
int32_t batchBucket(int32_t n, int32_t largest) {
  int32_t bucket = 1;
  while (bucket < n && bucket < 32)
    bucket *= 2;
  if (bucket < n)
    bucket = (n + 31) / 32 * 32;
  return std::min(bucket, largest);
}

int32_t contextBucket(int32_t context) {
  int32_t bucket = 64;
  while (bucket < context)
    bucket *= 2;
  return bucket;
}

} // namespace

bool CudaExecutor::State::graphable(const engine::Batch &b) const {
  return graph_max_batch > 0 && b.numTokens() == b.numSequences() &&
         b.numSequences() <= graph_max_batch;
}

// A decode step on a graph: the batch padded to its bucket (padding rows
// read page 0, write no cache slot and are never returned), the inputs
// copied to the fixed input buffer, then one graph launch. A graph is
// captured the first time its (batch, context) bucket is seen, by running
// the ordinary launch path under stream capture.
Status CudaExecutor::State::runDecodeGraph(const engine::Batch &b) {
  int32_t n = b.numSequences();
  int32_t bucket = batchBucket(n, graph_max_batch);
  int32_t stride = b.max_pages_per_seq;
  padded.token_ids.assign(b.token_ids.begin(), b.token_ids.end());
  padded.token_ids.resize(bucket, 0);
  padded.positions.assign(b.positions.begin(), b.positions.end());
  padded.positions.resize(bucket, 0);
  padded.slot_mapping.assign(b.slot_mapping.begin(), b.slot_mapping.end());
  padded.slot_mapping.resize(bucket, -1);
  padded.query_start_offsets.resize(static_cast<size_t>(bucket) + 1);
  for (int32_t i = 0; i <= bucket; ++i)
    padded.query_start_offsets[i] = i;
  padded.context_lens.assign(b.context_lens.begin(), b.context_lens.end());
  padded.context_lens.resize(bucket, 1);
  padded.block_tables.assign(b.block_tables.begin(), b.block_tables.end());
  padded.block_tables.resize(static_cast<size_t>(bucket) * stride, 0);
  padded.max_pages_per_seq = stride;
  TXC_RETURN_IF_ERROR(uploadInputs(padded));

  int32_t context = contextBucket(max_context);
  auto key = std::make_pair(bucket, context);
  auto it = decode_graphs.find(key);
  if (it == decode_graphs.end()) {
    graph_context = context;
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
       path + ": beginning the decode graph capture");
    Status captured = enqueueLaunches(padded);
    cudaGraph_t graph = nullptr;
    Status ended = cudaStatus(cudaStreamEndCapture(stream, &graph),
                              path + ": capturing the decode step of batch " +
                                  std::to_string(bucket));
    graph_context = 0;
    TXC_RETURN_IF_ERROR(captured);
    TXC_RETURN_IF_ERROR(ended);
    cudaGraphExec_t exec = nullptr;
    Status instantiated = cudaStatus(cudaGraphInstantiate(&exec, graph, 0),
                                     path + ": instantiating the decode graph");
    cudaGraphDestroy(graph);
    TXC_RETURN_IF_ERROR(instantiated);
    it = decode_graphs.emplace(key, exec).first;
  }
  batch = &b;
  return cudaStatus(cudaGraphLaunch(it->second, stream),
                    path + ": launching the decode graph");
}

// Runs one step; returns the logits rows (`logits`) or their argmax
// (`tokens`). The one host synchronisation is at the end, also after a
// failed launch, so nothing is left in flight on buffers the next step
// reuses.
Status CudaExecutor::State::step(const engine::Batch &b, float *logits, int32_t *tokens,
                                 const std::vector<engine::RowSampling> *sampling) {
  TXC_RETURN_IF_ERROR(validateBatch(b));
  int32_t n = b.numSequences();
  if (n > device_logits_rows)
    return outOfRange(path + ": batch of " + std::to_string(n) +
                      " sequences exceeds max_num_seqs " +
                      std::to_string(device_logits_rows));
  CU(cudaEventRecord(step_start, stream), path + ": event");
  Status status = Status::ok();
  if (graphable(b)) {
    status = runDecodeGraph(b);
  } else {
    status = uploadInputs(b);
    if (status.isOk())
      status = enqueueLaunches(b);
  }
  if (status.isOk() && logits)
    status = cudaStatus(cudaMemcpyAsync(logits, device_logits,
                                        static_cast<size_t>(n) * vocab_size * 4,
                                        cudaMemcpyDeviceToHost, stream),
                        path + ": copying the logits back");
  bool all_greedy = true;
  if (sampling) {
    if (sampling->size() != static_cast<size_t>(n))
      status = invalidArgument(path + ": " + std::to_string(sampling->size()) +
                               " sampling choices for " + std::to_string(n) + " sequences");
    for (const engine::RowSampling &row : *sampling)
      all_greedy = all_greedy && (row.temperature <= 0.0f || row.top_k == 1);
  }
  bool host_sampling_rows = tokens && !all_greedy && !options.device_sampling;
  if (status.isOk() && host_sampling_rows) {
    host_logits.resize(static_cast<size_t>(n) * vocab_size);
    status = cudaStatus(cudaMemcpyAsync(host_logits.data(), device_logits,
                                        host_logits.size() * 4, cudaMemcpyDeviceToHost, stream),
                        path + ": copying the logits back");
  } else if (status.isOk() && tokens && !all_greedy) {
    std::memcpy(host_row_sampling, sampling->data(), sizeof(engine::RowSampling) * n);
    status = cudaStatus(cudaMemcpyAsync(device_row_sampling, host_row_sampling,
                                        sizeof(engine::RowSampling) * n,
                                        cudaMemcpyHostToDevice, stream),
                        path + ": copying the sampling parameters");
    if (status.isOk())
      status = cudaStatus(launchSampling(device_logits, n, vocab_size, device_row_sampling,
                                         sampling_workspace, sampling_workspace_bytes,
                                         device_tokens, stream),
                          path + ": sampling");
  } else if (status.isOk() && tokens) {
    status = cudaStatus(launchArgmax(device_logits, n, vocab_size, device_tokens, stream),
                        path + ": greedy sampling");
  }
  if (status.isOk() && tokens && !host_sampling_rows)
    status = cudaStatus(cudaMemcpyAsync(host_tokens, device_tokens, static_cast<size_t>(n) * 4,
                                        cudaMemcpyDeviceToHost, stream),
                        path + ": copying the sampled tokens back");
  cudaEventRecord(step_end, stream);
  Status sync = cudaStatus(cudaStreamSynchronize(stream),
                           path + ": running the step on the GPU");
  batch = nullptr;
  TXC_RETURN_IF_ERROR(status);
  TXC_RETURN_IF_ERROR(sync);
  if (host_sampling_rows) {
    for (int32_t i = 0; i < n; ++i) {
      StatusOr<int32_t> token = engine::sampleTokenWithUniform(
          host_logits.data() + static_cast<size_t>(i) * vocab_size, vocab_size, (*sampling)[i]);
      tokens[i] = token.isOk() ? *token : -1;
    }
  } else if (tokens) {
    std::memcpy(tokens, host_tokens, static_cast<size_t>(n) * 4);
  }
  cudaEventElapsedTime(&last_step_ms, step_start, step_end);
  if (profile) {
    bool decode = b.numTokens() == n;
    for (int i = 0; i < plan->launches_size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, launch_events[i], launch_events[i + 1]);
      LaunchProfileEntry &entry = profile_totals[{plan->launches(i).op(), decode}];
      entry.op = plan->launches(i).op();
      entry.decode = decode;
      entry.launches += 1;
      entry.total_ms += ms;
    }
  }
  return Status::ok();
}

Status CudaExecutor::execute(const engine::Batch &batch, float *logits) {
  return state_->step(batch, logits, nullptr);
}

Status CudaExecutor::executeSampled(const engine::Batch &batch,
                                    const std::vector<engine::RowSampling> &sampling,
                                    int32_t *tokens) {
  return state_->step(batch, nullptr, tokens, &sampling);
}

int32_t CudaExecutor::decodeGraphCount() const {
  return static_cast<int32_t>(state_->decode_graphs.size());
}

} // namespace txc::cuda
