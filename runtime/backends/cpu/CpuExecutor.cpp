//===- CpuExecutor.cpp - Run an artifact's plan on the CPU ----------------===//
//
// Binding values: an arena slot's shape has -1 for its ragged row dimension,
// whose extent this step (tokens for most values, sequences after
// gather_last) is set by the launch that writes the slot and remembered per
// arena offset, so a later reader gets the producer's row count. Reading a
// slot nobody wrote this step is an error, as is a value larger than its
// slot (a batch beyond max_batch_tokens).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/CpuExecutor.h"

#include "runtime/backends/cpu/Kernels.h"
#include "runtime/backends/cpu/LaunchAttributes.h"
#include "runtime/backends/cpu/PlanValues.h"
#include "txc/engine/KvPageAllocator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <unordered_map>

namespace txc::cpu {

namespace pb = artifact::pb;

namespace {

const std::set<std::string> &knownOps() {
  static const std::set<std::string> ops = {
      "txk.embedding",     "txk.rms_norm",       "txk.add_rms_norm",
      "txk.gemm",          "txk.rope_append",    "txk.gemm_rope_append",
      "txk.attention",     "txk.gather_last",    "txk.all_reduce"};
  return ops;
}

/// Ops that read a KV-cache layer; their num_kv_heads / head_dim attributes
/// give that layer's geometry.
bool usesKvCache(const std::string &op) {
  return op == "txk.rope_append" || op == "txk.gemm_rope_append" ||
         op == "txk.attention";
}

struct LayerGeometry {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};

/// Everything one rank owns.
struct Rank {
  const pb::Plan *plan = nullptr;
  std::vector<unsigned char> arena;
  std::map<int32_t, LayerGeometry> layer_geometry;
  // Left uninitialised: the allocator maps a large block lazily, so only the
  // pages a sequence reaches take memory (a 1 GiB budget zero-filled cost
  // tx-run ~1.5 s at startup for a 1 MiB model); attention reads only
  // positions already appended.
  std::map<int32_t, std::unique_ptr<unsigned char[]>> kv_storage;
  std::map<int32_t, KvCacheLayer> kv_layers;
  // Rows of the value each arena offset holds this step.
  std::unordered_map<uint64_t, int64_t> rows_at_offset;
  std::vector<float> logits_scratch; // ranks other than 0
  std::vector<std::vector<unsigned char>> scratch; // per-launch copies
};

/// A bound operand or result.
struct Bound {
  enum class Kind { kAbsent, kMatrix, kInts, kBatch, kCache } kind = Kind::kAbsent;
  ConstMatrix matrix;
  void *mutable_data = nullptr;  // results
  const int32_t *ints = nullptr; // token ids, positions
  int64_t num_ints = 0;
  KvCacheLayer *cache = nullptr;
  bool in_arena = false;
  uint64_t arena_offset = 0;
};

std::string describeLaunch(int rank, int index, const pb::Launch &launch) {
  std::string text = "rank " + std::to_string(rank) + " launch " +
                     std::to_string(index) + " (" + launch.op();
  if (!launch.location().empty())
    text += " at " + launch.location();
  return text + ")";
}

} // namespace

struct CpuExecutor::State {
  const artifact::LoadedArtifact *artifact = nullptr;
  CpuExecutorOptions options;
  std::unique_ptr<ThreadPool> pool;
  std::vector<Rank> ranks;
  int32_t vocab_size = 0;
  int32_t page_size = 0;
  int32_t num_pages = 0;
  DType cache_dtype = DType::kInvalid;

  // The step being run.
  const engine::Batch *batch = nullptr;
  BatchView batch_view;
  float *logits = nullptr;

  Status prepare();
  Status validateBatch(const engine::Batch &batch) const;
  Status runLaunch(int index);
  Status runOnRank(Rank &rank, int rank_index, const pb::Launch &launch);
  Status runAllReduce(int index);

  StatusOr<Bound> bindOperand(Rank &rank, const pb::Launch &launch, int i,
                              bool required);
  StatusOr<Bound> bindResult(Rank &rank, const pb::Launch &launch, int i,
                             int64_t rows);
  StatusOr<ConstMatrix> floatOperand(Rank &rank, const pb::Launch &launch,
                                     int i, bool required);
  Status unaliasInputs(Rank &rank, std::vector<ConstMatrix *> inputs,
                       const std::vector<Bound> &results);
};

// --- preparation -----------------------------------------------------------

Status CpuExecutor::State::prepare() {
  const pb::Artifact &message = artifact->message();
  const std::string &path = artifact->path();
  if (message.plans_size() == 0)
    return invalidArgument(path + ": the artifact has no plan");
  if (artifact->weights().size() != static_cast<size_t>(message.weights_size()))
    return failedPrecondition(path + ": weights are not bound (load the "
                              "artifact with bind_weights)");
  int tp = message.options().tensor_parallel();
  if (tp > 0 && tp != message.plans_size())
    return invalidArgument(path + ": compiled for tensor_parallel " +
                           std::to_string(tp) + " but holds " +
                           std::to_string(message.plans_size()) + " plans");
  vocab_size = static_cast<int32_t>(message.config().vocab_size());
  if (vocab_size <= 0)
    return invalidArgument(path + ": config.vocab_size must be positive");

  const pb::Plan &first_plan = message.plans(0);
  ranks.resize(static_cast<size_t>(message.plans_size()));
  for (int r = 0; r < message.plans_size(); ++r) {
    Rank &rank = ranks[r];
    rank.plan = &message.plans(r);
    if (rank.plan->launches_size() != first_plan.launches_size())
      return invalidArgument(path + ": plan of rank " + std::to_string(r) +
                             " has " + std::to_string(rank.plan->launches_size()) +
                             " launches, rank 0 has " +
                             std::to_string(first_plan.launches_size()) +
                             "; CPU ranks run in lockstep");
    for (int i = 0; i < rank.plan->launches_size(); ++i) {
      const pb::Launch &launch = rank.plan->launches(i);
      std::string context = path + ": " + describeLaunch(r, i, launch);
      if (!knownOps().count(launch.op()))
        return unimplemented(context + ": unknown op for the CPU backend");
      if (launch.op() != first_plan.launches(i).op())
        return invalidArgument(context + ": rank 0 runs " +
                               first_plan.launches(i).op() +
                               " at this index; CPU ranks run in lockstep");
      if (!usesKvCache(launch.op()))
        continue;
      LaunchAttributes attributes(launch);
      StatusOr<int64_t> layer = attributes.getInt("layer");
      StatusOr<int64_t> kv_heads = attributes.getInt("num_kv_heads");
      StatusOr<int64_t> head_dim = attributes.getInt("head_dim");
      for (const Status &status :
           {layer.status(), kv_heads.status(), head_dim.status()})
        TXC_RETURN_IF_ERROR(withContext(context, status));
      if (*layer < 0 || *kv_heads <= 0 || *head_dim <= 0)
        return invalidArgument(context + ": layer, num_kv_heads and head_dim "
                               "must be non-negative / positive");
      LayerGeometry &geometry = rank.layer_geometry[static_cast<int32_t>(*layer)];
      if (geometry.kv_heads == 0) {
        geometry = {*kv_heads, *head_dim};
      } else if (geometry.kv_heads != *kv_heads ||
                 geometry.head_dim != *head_dim) {
        return invalidArgument(context + ": layer " + std::to_string(*layer) +
                               " was used with " +
                               std::to_string(geometry.kv_heads) + " KV heads of " +
                               std::to_string(geometry.head_dim) +
                               " by an earlier launch");
      }
    }
    // The arena grows with --max-batch-tokens: an artifact compiled for more
    // than this host holds must fail like an oversized KV cache, not abort.
    const uint64_t arena_bytes = rank.plan->arena_bytes();
    try {
      rank.arena.assign(static_cast<size_t>(arena_bytes), 0);
    } catch (const std::exception &) { // bad_alloc, or length_error past max_size()
      rank.arena.clear();
    }
    if (rank.arena.size() != arena_bytes)
      return resourceExhausted(
          path + ": the activation arena (" + std::to_string(arena_bytes) +
          " bytes, for max_batch_tokens " + std::to_string(message.options().max_batch_tokens()) +
          ") does not fit in host memory; compile with a smaller --max-batch-tokens");
  }
  if (!artifact::planWritesLogits(first_plan))
    return invalidArgument(path + ": no launch of the plan writes the logits "
                           "(a result that is STEP_INPUT_LOGITS)");

  const pb::CompileOptions &compile = message.options();
  cache_dtype = artifact::kvCacheDtype(compile);
  if (!isKernelFloatType(cache_dtype))
    return unimplemented(path + ": KV cache dtype " +
                         std::string(dtypeName(cache_dtype)) +
                         " is not supported on the CPU (F32, BF16, F16)");
  page_size = static_cast<int32_t>(compile.kv_page_size() > 0 ? compile.kv_page_size() : 16);

  uint64_t bytes_per_page_all_layers = 0;
  for (const Rank &rank : ranks)
    for (const auto &[layer, geometry] : rank.layer_geometry)
      bytes_per_page_all_layers += static_cast<uint64_t>(
          2 * page_size * geometry.kv_heads * geometry.head_dim) *
          dtypeSize(cache_dtype);
  engine::KvCacheSizing sizing;
  sizing.requested_pages = options.num_kv_pages;
  sizing.budget_bytes = options.kv_cache_budget_bytes;
  sizing.bytes_per_page = bytes_per_page_all_layers;
  sizing.max_num_seqs = compile.max_num_seqs() > 0 ? compile.max_num_seqs() : 256;
  sizing.max_seq_len = compile.max_seq_len() > 0 ? compile.max_seq_len() : 4096;
  sizing.page_size = page_size;
  StatusOr<int32_t> pages = engine::kvCachePages(sizing);
  TXC_RETURN_IF_ERROR(withContext(path, pages.status()));
  num_pages = pages.value();
  for (Rank &rank : ranks) {
    for (const auto &[layer, geometry] : rank.layer_geometry) {
      KvCacheLayer cache;
      cache.dtype = cache_dtype;
      cache.num_pages = num_pages;
      cache.page_size = page_size;
      cache.kv_heads = geometry.kv_heads;
      cache.head_dim = geometry.head_dim;
      std::unique_ptr<unsigned char[]> &storage = rank.kv_storage[layer];
      storage.reset(new (std::nothrow) unsigned char[static_cast<size_t>(
          num_pages * cache.pageElements() * dtypeSize(cache_dtype))]);
      if (!storage)
        return withContext(path, resourceExhausted(
                                     "the KV cache of layer " + std::to_string(layer) + " (" +
                                     std::to_string(num_pages) + " pages) does not fit in host memory"));
      cache.data = storage.get();
      rank.kv_layers[layer] = cache;
    }
  }
  return Status::ok();
}

// --- binding ---------------------------------------------------------------

StatusOr<Bound> CpuExecutor::State::bindOperand(Rank &rank,
                                                const pb::Launch &launch, int i,
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
                         arenaOperandShape(slot, rank.rows_at_offset, i, rank.arena.size()));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {rank.arena.data() + slot.offset(), shape.dtype, shape.rows, shape.cols};
    bound.in_arena = true;
    bound.arena_offset = slot.offset();
    return bound;
  }
  case pb::ValueRef::kWeightIndex: {
    TXC_ASSIGN_OR_RETURN(MatrixShape shape, weightOperandShape(*artifact, ref.weight_index(), i));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {artifact->weights()[ref.weight_index()].data, shape.dtype, shape.rows, shape.cols};
    return bound;
  }
  case pb::ValueRef::kStepInput: {
    switch (ref.step_input().kind()) {
    case pb::STEP_INPUT_TOKEN_IDS:
      bound.kind = Bound::Kind::kInts;
      bound.ints = batch->token_ids.data();
      bound.num_ints = batch->numTokens();
      return bound;
    case pb::STEP_INPUT_POSITIONS:
      bound.kind = Bound::Kind::kInts;
      bound.ints = batch->positions.data();
      bound.num_ints = batch->numTokens();
      return bound;
    case pb::STEP_INPUT_BATCH:
      bound.kind = Bound::Kind::kBatch;
      return bound;
    case pb::STEP_INPUT_KV_CACHE: {
      auto it = rank.kv_layers.find(ref.step_input().layer());
      if (it == rank.kv_layers.end())
        return invalidArgument("operand " + std::to_string(i) +
                               " is the KV cache of layer " +
                               std::to_string(ref.step_input().layer()) +
                               ", which no launch's layer attribute names");
      bound.kind = Bound::Kind::kCache;
      bound.cache = &it->second;
      return bound;
    }
    default:
      return unimplemented("operand " + std::to_string(i) + " is step input " +
                           pb::StepInputKind_Name(ref.step_input().kind()) +
                           ", which no txk op takes on the CPU");
    }
  }
  default:
    return invalidArgument("operand " + std::to_string(i) + " is empty");
  }
}

StatusOr<ConstMatrix> CpuExecutor::State::floatOperand(Rank &rank,
                                                       const pb::Launch &launch,
                                                       int i, bool required) {
  TXC_ASSIGN_OR_RETURN(Bound bound, bindOperand(rank, launch, i, required));
  if (bound.kind == Bound::Kind::kAbsent)
    return ConstMatrix{};
  if (bound.kind != Bound::Kind::kMatrix)
    return invalidArgument("operand " + std::to_string(i) +
                           " must be a tensor (arena value or weight)");
  if (!isKernelFloatType(bound.matrix.dtype))
    return unimplemented("operand " + std::to_string(i) + " has dtype " +
                         std::string(dtypeName(bound.matrix.dtype)) +
                         "; the CPU kernels take F32, BF16 or F16");
  return bound.matrix;
}

StatusOr<Bound> CpuExecutor::State::bindResult(Rank &rank,
                                               const pb::Launch &launch, int i,
                                               int64_t rows) {
  if (i >= launch.results_size())
    return invalidArgument("result " + std::to_string(i) + " is missing");
  const pb::ValueRef &ref = launch.results(i);
  Bound bound;
  bound.kind = Bound::Kind::kMatrix;
  if (ref.ref_case() == pb::ValueRef::kStepInput &&
      ref.step_input().kind() == pb::STEP_INPUT_LOGITS) {
    float *target = logits;
    if (&rank != &ranks.front()) {
      rank.logits_scratch.resize(static_cast<size_t>(rows * vocab_size));
      target = rank.logits_scratch.data();
    }
    if (rows != batch->numSequences())
      return invalidArgument("the logits have " + std::to_string(rows) +
                             " rows, one per sequence (" +
                             std::to_string(batch->numSequences()) +
                             ") expected");
    bound.matrix = {target, DType::kF32, rows, vocab_size};
    bound.mutable_data = target;
    return bound;
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
  if (!isKernelFloatType(dtype))
    return unimplemented("result " + std::to_string(i) + " has dtype " +
                         std::string(dtypeName(dtype)) +
                         "; the CPU kernels write F32, BF16 or F16");
  uint64_t bytes = static_cast<uint64_t>(rows * cols) * dtypeSize(dtype);
  if (bytes > slot.bytes() || slot.offset() + bytes > rank.arena.size())
    return outOfRange("result " + std::to_string(i) + " of " +
                      shapeString(rows, cols) + " (" + std::to_string(bytes) +
                      " bytes) does not fit its arena slot of " +
                      std::to_string(slot.bytes()) +
                      " bytes: the batch exceeds what the plan was compiled for");
  bound.matrix = {rank.arena.data() + slot.offset(), dtype, rows, cols};
  bound.mutable_data = rank.arena.data() + slot.offset();
  bound.in_arena = true;
  bound.arena_offset = slot.offset();
  rank.rows_at_offset[slot.offset()] = rows;
  return bound;
}

// Copies inputs that share arena bytes with a result, so kernels that write
// rows while other threads still read them never see half-updated data.
Status CpuExecutor::State::unaliasInputs(Rank &rank,
                                         std::vector<ConstMatrix *> inputs,
                                         const std::vector<Bound> &results) {
  for (ConstMatrix *input : inputs) {
    if (!input->present())
      continue;
    bool aliased = false;
    for (const Bound &result : results)
      if (result.mutable_data &&
          overlaps(input->data, input->bytes(), result.mutable_data,
                   result.matrix.bytes()))
        aliased = true;
    if (!aliased)
      continue;
    rank.scratch.emplace_back(
        static_cast<const unsigned char *>(input->data),
        static_cast<const unsigned char *>(input->data) + input->bytes());
    input->data = rank.scratch.back().data();
  }
  return Status::ok();
}

static Matrix asMutable(const Bound &bound) {
  return {bound.mutable_data, bound.matrix.dtype, bound.matrix.rows,
          bound.matrix.cols};
}

// --- running ---------------------------------------------------------------

Status CpuExecutor::State::runOnRank(Rank &rank, int rank_index,
                                     const pb::Launch &launch) {
  const std::string &op = launch.op();
  LaunchAttributes attributes(launch);
  ThreadPool &threads = *pool;
  rank.scratch.clear();

  if (op == "txk.embedding") {
    TXC_ASSIGN_OR_RETURN(Bound tokens, bindOperand(rank, launch, 0, true));
    if (tokens.kind != Bound::Kind::kInts)
      return invalidArgument("operand 0 must be the token ids");
    TXC_ASSIGN_OR_RETURN(ConstMatrix table, floatOperand(rank, launch, 1, true));
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, tokens.num_ints));
    return embeddingKernel(tokens.ints, tokens.num_ints, table,
                           attributes.getIntOr("vocab_start", 0), asMutable(out),
                           threads);
  }
  if (op == "txk.rms_norm") {
    TXC_ASSIGN_OR_RETURN(ConstMatrix input, floatOperand(rank, launch, 0, true));
    TXC_ASSIGN_OR_RETURN(ConstMatrix weight, floatOperand(rank, launch, 1, false));
    TXC_ASSIGN_OR_RETURN(double eps, attributes.getFloat("eps"));
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, input.rows));
    TXC_RETURN_IF_ERROR(unaliasInputs(rank, {&input}, {out}));
    return rmsNormKernel(input, weight, eps, asMutable(out), threads);
  }
  if (op == "txk.add_rms_norm") {
    TXC_ASSIGN_OR_RETURN(ConstMatrix input, floatOperand(rank, launch, 0, true));
    TXC_ASSIGN_OR_RETURN(ConstMatrix residual, floatOperand(rank, launch, 1, true));
    TXC_ASSIGN_OR_RETURN(ConstMatrix weight, floatOperand(rank, launch, 2, false));
    TXC_ASSIGN_OR_RETURN(double eps, attributes.getFloat("eps"));
    TXC_ASSIGN_OR_RETURN(Bound sum, bindResult(rank, launch, 0, input.rows));
    TXC_ASSIGN_OR_RETURN(Bound normed, bindResult(rank, launch, 1, input.rows));
    TXC_RETURN_IF_ERROR(unaliasInputs(rank, {&input, &residual}, {sum, normed}));
    return addRmsNormKernel(input, residual, weight, eps, asMutable(sum),
                            asMutable(normed), threads);
  }
  if (op == "txk.gemm") {
    TXC_ASSIGN_OR_RETURN(ConstMatrix input, floatOperand(rank, launch, 0, true));
    TXC_ASSIGN_OR_RETURN(ConstMatrix weight, floatOperand(rank, launch, 1, true));
    TXC_ASSIGN_OR_RETURN(ConstMatrix bias, floatOperand(rank, launch, 2, false));
    TXC_ASSIGN_OR_RETURN(ConstMatrix residual, floatOperand(rank, launch, 3, false));
    TXC_ASSIGN_OR_RETURN(GemmEpilogue epilogue,
                         parseGemmEpilogue(attributes.getStringOr("epilogue", "none")));
    if (epilogue == GemmEpilogue::kResidualAdd && !residual.present())
      return invalidArgument("epilogue residual_add needs operand 3 (residual)");
    // Row-parallel GEMMs produce partial sums; the residual must enter the
    // all_reduce once, so only rank 0 adds it.
    if (rank_index > 0 && attributes.getFlag("residual_on_first_rank"))
      residual = ConstMatrix{};
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, input.rows));
    return gemmKernel(input, weight, bias, epilogue, residual, asMutable(out),
                      threads);
  }
  if (op == "txk.rope_append" || op == "txk.gemm_rope_append") {
    bool fused = op == "txk.gemm_rope_append";
    int base = fused ? 2 : 0; // gemm_rope_append: input, weight, bias, then as rope_append
    RopeAppendParams params;
    TXC_ASSIGN_OR_RETURN(params.num_heads, attributes.getInt("num_heads"));
    TXC_ASSIGN_OR_RETURN(params.num_kv_heads, attributes.getInt("num_kv_heads"));
    TXC_ASSIGN_OR_RETURN(params.head_dim, attributes.getInt("head_dim"));
    TXC_ASSIGN_OR_RETURN(params.rope, attributes.getRope());
    TXC_ASSIGN_OR_RETURN(Bound positions, bindOperand(rank, launch, base + 1, true));
    TXC_ASSIGN_OR_RETURN(Bound cache, bindOperand(rank, launch, base + 2, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(rank, launch, base + 3, true));
    if (positions.kind != Bound::Kind::kInts || cache.kind != Bound::Kind::kCache ||
        batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operands " + std::to_string(base + 1) + ".." +
                             std::to_string(base + 3) +
                             " must be positions, the KV cache and the batch");
    TXC_ASSIGN_OR_RETURN(ConstMatrix q_norm, floatOperand(rank, launch, base + 4, false));
    TXC_ASSIGN_OR_RETURN(ConstMatrix k_norm, floatOperand(rank, launch, base + 5, false));
    if (q_norm.present() || k_norm.present()) {
      TXC_ASSIGN_OR_RETURN(params.norm_eps, attributes.getFloat("norm_eps"));
    }

    ConstMatrix qkv;
    std::vector<unsigned char> qkv_storage;
    int64_t rows = batch->numTokens();
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, rows));
    if (fused) {
      TXC_ASSIGN_OR_RETURN(ConstMatrix input, floatOperand(rank, launch, 0, true));
      TXC_ASSIGN_OR_RETURN(ConstMatrix weight, floatOperand(rank, launch, 1, true));
      TXC_ASSIGN_OR_RETURN(ConstMatrix bias, floatOperand(rank, launch, 2, false));
      // QKV is rounded to the result dtype, exactly what an unfused gemm
      // followed by rope_append would see.
      Matrix qkv_out{nullptr, out.matrix.dtype, input.rows, weight.rows};
      qkv_storage.resize(qkv_out.bytes());
      qkv_out.data = qkv_storage.data();
      TXC_RETURN_IF_ERROR(gemmKernel(input, weight, bias, GemmEpilogue::kNone,
                                     ConstMatrix{}, qkv_out, threads));
      qkv = qkv_out.view();
    } else {
      TXC_ASSIGN_OR_RETURN(qkv, floatOperand(rank, launch, 0, true));
      TXC_RETURN_IF_ERROR(unaliasInputs(rank, {&qkv}, {out}));
    }
    return ropeAppendKernel(qkv, positions.ints, *cache.cache, batch_view, params,
                            q_norm, k_norm, asMutable(out), threads);
  }
  if (op == "txk.attention") {
    AttentionParams params;
    TXC_ASSIGN_OR_RETURN(params.num_heads, attributes.getInt("num_heads"));
    TXC_ASSIGN_OR_RETURN(params.num_kv_heads, attributes.getInt("num_kv_heads"));
    TXC_ASSIGN_OR_RETURN(params.head_dim, attributes.getInt("head_dim"));
    TXC_ASSIGN_OR_RETURN(params.scale, attributes.getFloat("scale"));
    params.causal = attributes.getFlag("causal");
    params.sliding_window = attributes.getIntOr("sliding_window", 0);
    params.logit_softcap = attributes.getFloatOr("logit_softcap", 0.0);
    TXC_ASSIGN_OR_RETURN(ConstMatrix query, floatOperand(rank, launch, 0, true));
    TXC_ASSIGN_OR_RETURN(Bound cache, bindOperand(rank, launch, 1, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(rank, launch, 2, true));
    if (cache.kind != Bound::Kind::kCache || batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operands 1 and 2 must be the KV cache and the batch");
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, query.rows));
    TXC_RETURN_IF_ERROR(unaliasInputs(rank, {&query}, {out}));
    return attentionKernel(query, *cache.cache, batch_view, params,
                           asMutable(out), threads);
  }
  if (op == "txk.gather_last") {
    TXC_ASSIGN_OR_RETURN(ConstMatrix input, floatOperand(rank, launch, 0, true));
    TXC_ASSIGN_OR_RETURN(Bound batch_operand, bindOperand(rank, launch, 1, true));
    if (batch_operand.kind != Bound::Kind::kBatch)
      return invalidArgument("operand 1 must be the batch");
    TXC_ASSIGN_OR_RETURN(Bound out, bindResult(rank, launch, 0, batch->numSequences()));
    TXC_RETURN_IF_ERROR(unaliasInputs(rank, {&input}, {out}));
    return gatherLastKernel(input, batch_view, asMutable(out));
  }
  return unimplemented("unknown op for the CPU backend");
}

Status CpuExecutor::State::runAllReduce(int index) {
  std::vector<Matrix> buffers;
  for (size_t r = 0; r < ranks.size(); ++r) {
    Rank &rank = ranks[r];
    const pb::Launch &launch = rank.plan->launches(index);
    std::string context = artifact->path() + ": " +
                          describeLaunch(static_cast<int>(r), index, launch);
    LaunchAttributes attributes(launch);
    int64_t group = attributes.getIntOr("group_size", static_cast<int64_t>(ranks.size()));
    if (group != static_cast<int64_t>(ranks.size()))
      return invalidArgument(context + ": group_size " + std::to_string(group) +
                             " but the artifact has " +
                             std::to_string(ranks.size()) + " ranks");
    StatusOr<ConstMatrix> input = floatOperand(rank, launch, 0, true);
    TXC_RETURN_IF_ERROR(withContext(context, input.status()));
    StatusOr<Bound> out = bindResult(rank, launch, 0, input->rows);
    TXC_RETURN_IF_ERROR(withContext(context, out.status()));
    Matrix target = asMutable(*out);
    if (target.cols != input->cols || target.dtype != input->dtype)
      return invalidArgument(context + ": result must match the input's shape "
                             "and dtype");
    // Normally in place; otherwise start from a copy of the input.
    if (target.data != input->data)
      std::memmove(target.data, input->data, input->bytes());
    buffers.push_back(target);
  }
  return withContext(artifact->path() + ": launch " + std::to_string(index) +
                         " (txk.all_reduce)",
                     allReduceSum(buffers, *pool));
}

Status CpuExecutor::State::runLaunch(int index) {
  if (ranks.front().plan->launches(index).op() == "txk.all_reduce")
    return runAllReduce(index);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const pb::Launch &launch = ranks[r].plan->launches(index);
    TXC_RETURN_IF_ERROR(withContext(
        artifact->path() + ": " + describeLaunch(static_cast<int>(r), index, launch),
        runOnRank(ranks[r], static_cast<int>(r), launch)));
  }
  return Status::ok();
}

Status CpuExecutor::State::validateBatch(const engine::Batch &b) const {
  return cpu::validateBatch(b, artifact->path(), vocab_size, num_pages, page_size);
}

// --- the public class ------------------------------------------------------

CpuExecutor::CpuExecutor(std::unique_ptr<State> state) : state_(std::move(state)) {}
CpuExecutor::~CpuExecutor() = default;

StatusOr<std::unique_ptr<CpuExecutor>>
CpuExecutor::create(const artifact::LoadedArtifact &artifact,
                    const CpuExecutorOptions &options) {
  auto state = std::make_unique<State>();
  state->artifact = &artifact;
  state->options = options;
  TXC_RETURN_IF_ERROR(state->prepare());
  state->pool = std::make_unique<ThreadPool>(options.num_threads);
  return std::unique_ptr<CpuExecutor>(new CpuExecutor(std::move(state)));
}

int32_t CpuExecutor::vocabSize() const { return state_->vocab_size; }
int CpuExecutor::numRanks() const { return static_cast<int>(state_->ranks.size()); }
int32_t CpuExecutor::numKvPages() const { return state_->num_pages; }
int32_t CpuExecutor::kvPageSize() const { return state_->page_size; }
int CpuExecutor::numThreads() const { return state_->pool->numThreads(); }

engine::EngineConfig CpuExecutor::engineConfig() const {
  return cpu::engineConfigFor(*state_->artifact, state_->page_size, state_->num_pages);
}

Status CpuExecutor::execute(const engine::Batch &batch, float *logits) {
  State &s = *state_;
  TXC_RETURN_IF_ERROR(s.validateBatch(batch));
  s.batch = &batch;
  s.logits = logits;
  s.batch_view = BatchView{batch.query_start_offsets.data(),
                           batch.context_lens.data(),
                           batch.block_tables.data(),
                           batch.slot_mapping.data(),
                           batch.numSequences(),
                           batch.numTokens(),
                           batch.max_pages_per_seq};
  for (Rank &rank : s.ranks)
    rank.rows_at_offset.clear();
  int launches = s.ranks.front().plan->launches_size();
  for (int i = 0; i < launches; ++i)
    TXC_RETURN_IF_ERROR(s.runLaunch(i));
  s.batch = nullptr;
  return Status::ok();
}

} // namespace txc::cpu
