//===- ExecutorState.h - The CUDA executor's state, shared by its parts -===//
//
// CudaExecutor's implementation is split by concern, one file each:
// CudaExecutor.cpp (checks, allocation at create, the public class),
// Binding.cpp (plan operands to device matrices, step inputs), Launches.cpp
// (one txk op to kernels: GEMM/GEMV, norms, rope, attention; cuBLASLt in
// CublasGemm.cpp), Steps.cpp (a step: warm-up, CUDA graphs, sampling).
// Private to runtime/backends/cuda.
//
// Binding mirrors CpuExecutor: an arena slot's -1 row dimension is set per
// step by the launch that writes the slot and remembered per offset (host
// bookkeeping only; nothing waits on the GPU). Inputs that overlap a result
// in a way a kernel could race on are copied to scratch first.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_EXECUTORSTATE_H
#define TXC_RUNTIME_BACKENDS_CUDA_EXECUTORSTATE_H

// The kernel library's status.h defines its own TXC_RETURN_IF_ERROR for
// txc::kernels::Status: include it first and let txc/Status.h's win.
#include "attention/attention.h"
#undef TXC_RETURN_IF_ERROR
#undef TXC_ASSIGN_OR_RETURN

#include "runtime/backends/cpu/Kernels.h" // shapeString, GemmEpilogue
#include "runtime/backends/cpu/LaunchAttributes.h"
#include "runtime/backends/cpu/PlanValues.h"
#include "runtime/backends/cuda/CublasGemm.h"
#include "runtime/backends/cuda/CudaExecutor.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DecodeGemm.h"
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/SkinnyGemm.h"

#include <cuda_runtime.h>

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace txc::cuda {

namespace pb = artifact::pb;
using cpu::LaunchAttributes;
using cpu::shapeString;

inline Status cudaStatus(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  if (error == cudaErrorMemoryAllocation)
    return resourceExhausted(what + ": out of GPU memory (" + cudaGetErrorString(error) + ")");
  return internalError(what + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
                       ")");
}

#define CU(call, what) TXC_RETURN_IF_ERROR(cudaStatus((call), (what)))

inline StatusOr<EType> etype(DType dtype, const std::string &what) {
  switch (dtype) {
  case DType::kF32:
    return EType::kF32;
  case DType::kBF16:
    return EType::kBF16;
  case DType::kF16:
    return EType::kF16;
  default:
    return unimplemented(what + " has dtype " + std::string(dtypeName(dtype)) +
                         "; the CUDA kernels take F32, BF16 or F16");
  }
}

inline std::string describeLaunch(int index, const pb::Launch &launch) {
  std::string text = "launch " + std::to_string(index) + " (" + launch.op();
  if (!launch.location().empty())
    text += " at " + launch.location();
  return text + ")";
}

inline bool overlaps(const void *a, uint64_t a_bytes, const void *b, uint64_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a && b && x < y + b_bytes && y < x + a_bytes;
}

/// A device tensor view (row-major 2-D).
struct DMatrix {
  void *data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t rows = 0, cols = 0;
  bool present() const { return data != nullptr; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows * cols) * dtypeSize(dtype); }
};

struct Bound {
  enum class Kind { kAbsent, kMatrix, kTokenIds, kPositions, kBatch, kCache } kind = Kind::kAbsent;
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
  /// A decode step's rotary factors at its positions, [max_num_seqs][half]
  /// (cos, sin) pairs on the device, for the decode attention's folded rope
  /// (RopeAppendArgs::step_factors): written by the step's first kernel, the
  /// embedding, once for all the tables with the same frequencies and
  /// scaling (every layer's, in the models seen); null: not computed.
  float *step_factors = nullptr;
};

inline constexpr int kMaxDecodeSplits = 32;
/// DecodeGemm.cu's partial tiles (8 MB: (CTAs + tiles) x 64 x 32 floats,
/// 3.8 MB for Llama-3-8B's gate/up at 32 rows) and tile counters.
inline constexpr int64_t kDecodeGemmPartialFloats = int64_t{2} << 20;
inline constexpr int64_t kDecodeGemmCounters = 4096;

struct CudaExecutor::State {
  const artifact::LoadedArtifact *artifact = nullptr;
  CudaExecutorOptions options;
  const pb::Plan *plan = nullptr;
  std::string path;
  int32_t vocab_size = 0, page_size = 0, num_pages = 0;
  DType cache_dtype = DType::kInvalid;
  int64_t max_num_seqs = 256;
  int32_t max_seq_len = 4096; // the artifact's (compile options), 4096 unset

  cudaStream_t stream = nullptr;
  cudaEvent_t step_start = nullptr, step_end = nullptr;
  // profile_launches: one event before each launch and one at the end.
  bool profile = false;
  std::vector<cudaEvent_t> launch_events;
  std::map<std::pair<std::string, bool>, LaunchProfileEntry> profile_totals;
  std::string profileLabel(const pb::Launch &launch) const;
  CublasGemm cublas; // the GEMMs our kernels do not take
  std::vector<void *> allocations;
  std::vector<void *> weights; // device pointer per manifest entry
  unsigned char *arena = nullptr;
  uint64_t arena_bytes = 0;
  std::map<int32_t, LayerCache> caches;
  std::map<int, RopeTable> rope_tables; // per launch index
  StepRopeFactors step_rope_factors; // the distinct tables' buffers (positions set a step)
  int32_t rope_factor_rows = 0;       // sequences whose factors this step computed
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
  float last_step_ms = 0.0f;
  // ablate_decode_out_proj: the decode attention's output, whose GEMM (the
  // output projection) the next gemm() skips.
  const void *ablated_out_proj_input = nullptr;
  // Sampling on the device (argmax alone when every row is greedy), tokens
  // back through pinned memory.
  int32_t *device_tokens = nullptr, *host_tokens = nullptr;
  void *argmax_workspace = nullptr; // argmaxWorkspaceBytes(max_num_seqs)
  engine::RowSampling *device_row_sampling = nullptr, *host_row_sampling = nullptr;
  void *sampling_workspace = nullptr;
  size_t sampling_workspace_bytes = 0;
  std::vector<float> host_logits; // non-greedy rows sampled on the host
  // decode_lookahead: the step queued ahead (decodeStepAhead) and what it
  // ran: its batch, whose token ids are the tokens returned for the step
  // before it (its own inputs come from that step's argmax on the GPU), and
  // its events and pinned tokens (swapped with step_start, step_end and
  // host_tokens when the engine's batch takes it).
  struct Lookahead {
    bool pending = false;
    engine::Batch batch;
    std::vector<engine::RowSampling> sampling; // its rows' draws (uniform: the next_uniform given)
    cudaEvent_t start = nullptr, end = nullptr;
    int32_t *host_tokens = nullptr;
    int64_t queued = 0, taken = 0; // steps queued ahead, and run by the engine's batch
  } ahead;
  // uploadInputs alternates between two halves of host_inputs: a step's
  // inputs are written while the copy of the step queued before may still
  // be waiting for the GPU.
  int input_half = 0;
  int sampling_half = 0; // the same for host_row_sampling
  // Decode steps replay a CUDA graph per (batch bucket, context bucket); the
  // context bucket fixes the split-KV count the graph was captured with.
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> decode_graphs;
  std::set<int32_t> gemm_tuned_buckets; // tune_gemms: batch buckets already run uncaptured
  int32_t graph_max_batch = 0;          // 0: no graphs
  engine::Batch padded;                 // the bucket-sized batch a graph runs
  int32_t graph_context = 0;            // > 0 while running a graph: planning context
  // rms_norm launches whose result only the next launch's GEMM reads: for
  // decode-sized batches the GEMV applies the norm in its prologue and the
  // norm launch is skipped (fusableNorms).
  std::set<int> fusable_norms;
  unsigned *rope_counters = nullptr;         // kGemvMaxRopeHeads, zero between launches
  DecodeGemmWorkspace decode_gemm_workspace; // with options.decode_gemm
  struct PendingNorm {
    bool active = false;
    DMatrix input, weight, out;
    float eps = 0.0f;
  } pending_norm;
  DecodeAttentionSetup decode_attention;         // options resolved for this plan
  DecodeAttentionTuning decode_attention_tuning; // tune_decode_attention's outcome
  // rope_in_attention: a decode step's rope whose query only the next
  // launch, the decode attention, reads is not launched; the attention
  // kernel folds it in (DecodeParams::maybe_rope_qkv), or it is launched
  // before whatever comes next (flushPendingRope).
  std::set<int> fusable_ropes;
  // gather_last launches a step of one token a sequence skips
  // (identityGathers): later launches read the gather's input where they
  // name its result, while `gather_aliases` (result slot offset -> input,
  // this step only) holds it; a launch writing the result's slot ends it.
  std::set<int> identity_gathers;
  std::unordered_map<uint64_t, DMatrix> gather_aliases;
  struct PendingRope {
    bool active = false;
    RopeAppendArgs args;
  } pending_rope;
  int num_sms = 0; // of the GPU (launch shapes that fit one wave)
  // Set while the QKV projection's GEMM is launched (qkv_carveout_percent).
  bool qkv_gemv = false;
  // Set while the launch right after a decode attention runs
  // (gemv_after_attention_late_dependents).
  bool after_attention = false;

  // Decode step tracing (options.trace_decode_steps): kTraceSlotsPerLaunch
  // globaltimer slots per traced kernel (kernels::TraceSlot) in d_trace; the labels of
  // the kernels that took them, in launch order, as the last enqueue
  // (trace_labels: a capture, for graph replays) and the step last run
  // (step_trace_labels) assigned them; what that step recorded.
  static constexpr size_t kMaxTracedLaunches = 4096;
  unsigned long long *d_trace = nullptr;
  std::string trace_op_label; // the plan launch being enqueued
  std::vector<std::string> trace_labels;
  std::map<std::pair<int32_t, int32_t>, std::vector<std::string>> graph_trace_labels;
  std::vector<std::string> step_trace_labels;
  std::vector<DecodeTraceEntry> last_trace;
  /// The next kernel's slots, or null where the step is not traced (no
  /// trace buffer, a prefill step, or the buffer full).
  unsigned long long *takeTraceSlots(const char *kernel);
  Status readTrace();

  // The step being run.
  const engine::Batch *batch = nullptr;
  const int32_t *d_tokens = nullptr, *d_positions = nullptr, *d_slots = nullptr, *d_qso = nullptr,
                *d_context = nullptr, *d_tables = nullptr;
  int32_t max_new_tokens = 0, max_context = 0;
  std::unordered_map<uint64_t, int64_t> rows_at_offset;
  bool wrote_logits = false;

  ~State();
  StatusOr<void *> allocate(uint64_t bytes, const std::string &what);
  Status prepare();
  Status validateBatch(const engine::Batch &batch) const;
  Status uploadInputs(const engine::Batch &batch, int32_t device_token_ids = 0);
  Status runLaunch(int index, const pb::Launch &launch);
  Status enqueueLaunches(const engine::Batch &batch);
  bool graphable(const engine::Batch &batch) const;
  Status runDecodeGraph(const engine::Batch &batch, const int32_t *device_token_ids = nullptr,
                        bool token_ids_in_place = false);
  bool lookaheadEligible(const engine::Batch &batch, const float *logits, const int32_t *tokens,
                         const std::vector<engine::RowSampling> *sampling) const;
  Status decodeStepAhead(const engine::Batch &batch, const std::vector<engine::RowSampling> &sampling,
                         int32_t *tokens);
  bool aheadMatches(const engine::Batch &batch, const std::vector<engine::RowSampling> &sampling) const;
  Status enqueueDraw(int32_t rows, const std::vector<engine::RowSampling> *sampling);
  Status enqueueStep(const engine::Batch &batch, const std::vector<engine::RowSampling> &sampling,
                     cudaEvent_t start, cudaEvent_t end, int32_t *host, const int32_t *device_token_ids,
                     bool token_ids_in_place);
  // Whether the last draw also wrote its tokens into the step inputs' token
  // ids (the argmax does; the sampler does not): the step queued after it
  // then uploads the rest of its inputs only.
  bool draw_fed_token_ids = false;
  Status enqueueLookahead(const engine::Batch &batch, const std::vector<engine::RowSampling> &sampling);
  Status drainLookahead();
  Status step(const engine::Batch &batch, float *logits, int32_t *tokens,
              const std::vector<engine::RowSampling> *sampling = nullptr);
  Status warmUp();
  Status captureDecodeGraphs(int32_t max_seq_len, int32_t pages_per_seq);
  Status tuneDecodeAttention(int32_t max_seq_len, int32_t pages_per_seq);

  StatusOr<Bound> bindOperand(const pb::Launch &launch, int i, bool required);
  StatusOr<DMatrix> floatOperand(const pb::Launch &launch, int i, bool required);
  StatusOr<DMatrix> bindResult(const pb::Launch &launch, int i, int64_t rows);
  StatusOr<DMatrix> copyToScratch(const DMatrix &input);
  Status unalias(std::vector<DMatrix *> inputs, std::vector<DMatrix> results);
  Status gemm(const DMatrix &input, const DMatrix &weight, const DMatrix &bias,
              const DMatrix &residual, const DMatrix &out);
  StatusOr<bool> tryGemv(const DMatrix &input, const DMatrix &weight, const DMatrix &bias,
                         const DMatrix &residual, GemvEpilogue epilogue, const DMatrix &out,
                         const RopeAppendArgs *rope = nullptr);
  Status launchNorm(const DMatrix &input, const DMatrix *residual, const DMatrix &weight, float eps,
                    const DMatrix *sum, const DMatrix &out);
  Status flushPendingNorm();
  Status flushPendingRope();
  Status attention(const LaunchAttributes &attributes, const DMatrix &query,
                   const LayerCache &cache, const DMatrix &out);
};

} // namespace txc::cuda

#endif
