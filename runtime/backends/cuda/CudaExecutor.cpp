//===- CudaExecutor.cpp - Checks, allocation, the public class -------------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include "runtime/backends/cpu/Rotary.h"
#include "runtime/backends/cuda/PlanFusion.h"
#include "runtime/backends/cuda/Sampler.h"
#include "txc/engine/KvPageAllocator.h"

#include <algorithm>

namespace txc::cuda {

namespace {

const std::set<std::string> &knownOps() {
  static const std::set<std::string> ops = {
      "txk.embedding",   "txk.rms_norm",         "txk.add_rms_norm", "txk.gemm",
      "txk.rope_append", "txk.gemm_rope_append", "txk.attention",    "txk.gather_last"};
  return ops;
}

bool usesKvCache(const std::string &op) {
  return op == "txk.rope_append" || op == "txk.gemm_rope_append" || op == "txk.attention";
}

} // namespace

CudaExecutor::State::~State() {
  if (stream)
    cudaStreamSynchronize(stream);
  for (auto &[key, graph] : decode_graphs)
    cudaGraphExecDestroy(graph);
  if (host_tokens)
    cudaFreeHost(host_tokens);
  if (ahead.host_tokens)
    cudaFreeHost(ahead.host_tokens);
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
  if (ahead.start)
    cudaEventDestroy(ahead.start);
  if (ahead.end)
    cudaEventDestroy(ahead.end);
  if (stream)
    cudaStreamDestroy(stream);
}

StatusOr<void *> CudaExecutor::State::allocate(uint64_t bytes, const std::string &what) {
  void *p = nullptr;
  cudaError_t error = cudaMalloc(&p, std::max<uint64_t>(bytes, 256));
  if (error != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return resourceExhausted(path + ": cannot allocate " + std::to_string(bytes) +
                             " bytes of GPU memory for " + what + " (" +
                             std::to_string(free_bytes) + " of " + std::to_string(total) +
                             " free): " + cudaGetErrorString(error));
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
        std::string(error == cudaSuccess ? "no devices" : cudaGetErrorString(error)) +
        "); use --device cpu");
  if (options.device < 0 || options.device >= device_count)
    return invalidArgument(path + ": GPU " + std::to_string(options.device) + " does not exist (" +
                           std::to_string(device_count) + " present)");
  CU(cudaSetDevice(options.device), path + ": cudaSetDevice");
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, options.device), path + ": device properties");
  if (prop.major != 9 || prop.minor != 0)
    return failedPrecondition(path + ": GPU " + std::to_string(options.device) + " (" + prop.name +
                              ") is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                              "; the CUDA backend is built for sm_90a (Hopper)");
  num_sms = prop.multiProcessorCount;

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
  CU(cudaEventCreate(&ahead.start), path + ": event");
  CU(cudaEventCreate(&ahead.end), path + ": event");

  const pb::CompileOptions &compile = message.options();
  page_size = static_cast<int32_t>(compile.kv_page_size() > 0 ? compile.kv_page_size() : 16);
  if (compile.max_num_seqs() > 0)
    max_num_seqs = compile.max_num_seqs();

  // Check the launches; collect KV geometry, rotary tables, scratch needs.
  std::map<int32_t, std::pair<int64_t, int64_t>> geometry;
  // step_rope_factors' sets by frequencies and scaling. The embedding kernel
  // computes them, so only a plan that starts with it folds its ropes.
  std::vector<std::pair<std::vector<float>, float>> factor_set_keys;
  const bool embedding_first = plan->launches_size() > 0 && plan->launches(0).op() == "txk.embedding";
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
        gemm_scratch_need =
            std::max<uint64_t>(gemm_scratch_need, static_cast<uint64_t>(rows * n) * 4);
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
      return invalidArgument(context + ": layer " + std::to_string(*layer) + " was used with " +
                             std::to_string(g.first) + " KV heads of " + std::to_string(g.second) +
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
      CU(cudaMemcpy(p, f.inv_freq.data(), f.inv_freq.size() * 4, cudaMemcpyHostToDevice),
         context + ": rotary upload");
      // One step-factor buffer for each distinct table; past
      // kMaxStepFactorSets of them a table's ropes are not folded.
      int set = 0;
      while (set < step_rope_factors.sets &&
             factor_set_keys[set] != std::make_pair(f.inv_freq, f.attention_scaling))
        ++set;
      if (set == step_rope_factors.sets && set < kMaxStepFactorSets && embedding_first) {
        TXC_ASSIGN_OR_RETURN(void *factors,
                             allocate(max_num_seqs * table.half * 2 * sizeof(float), "rotary step factors"));
        factor_set_keys.emplace_back(f.inv_freq, f.attention_scaling);
        step_rope_factors.inv_freq[set] = table.inv_freq;
        step_rope_factors.half[set] = static_cast<int>(table.half);
        step_rope_factors.attention_scaling[set] = table.attention_scaling;
        step_rope_factors.out[set] = static_cast<float *>(factors);
        ++step_rope_factors.sets;
      }
      table.step_factors = set < step_rope_factors.sets ? step_rope_factors.out[set] : nullptr;
      rope_tables[i] = table;
    }
  }
  if (options.use_gemv && options.fuse_norms)
    fusable_norms = fusableNorms(*plan);
  if (options.decode_wide_cta_max_keys < 1)
    return invalidArgument(path + ": decode_wide_cta_max_keys " +
                           std::to_string(options.decode_wide_cta_max_keys) + " must be positive");
  if (options.attention_cluster_max_splits < 2 ||
      options.attention_cluster_max_splits > kernels::kMaxClusterSplits)
    return invalidArgument(path + ": attention_cluster_max_splits " +
                           std::to_string(options.attention_cluster_max_splits) + " is outside 2-" +
                           std::to_string(kernels::kMaxClusterSplits));
  if (options.decode_min_splits < 1 || options.decode_min_splits > kMaxDecodeSplits)
    return invalidArgument(path + ": decode_min_splits " + std::to_string(options.decode_min_splits) +
                           " is outside 1-" + std::to_string(kMaxDecodeSplits));
  for (const GemvShapeConfig &c : options.gemv_configs)
    if (!gemvConfigSupported({c.warps_per_block, c.unroll, c.target_warps_per_sm}))
      return invalidArgument(path + ": GEMV configuration " + std::to_string(c.warps_per_block) +
                             "/" + std::to_string(c.unroll) + "/" +
                             std::to_string(c.target_warps_per_sm) + " for " +
                             shapeString(c.n, c.k) +
                             ": warps per block 4 or 8, chunks 2, 4 or 8, warps per SM 1-1024");
  decode_attention = decodeAttentionSetup(options, max_heads, max_kv_heads);
  fusable_ropes = fusableRopes(*plan);
  identity_gathers = identityGathers(*plan);
  if (!artifact::planWritesLogits(*plan))
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
  TXC_RETURN_IF_ERROR(withContext(path, cublas.init(cublas_workspace, kCublasWorkspaceBytes)));
  cublas.setTuning(options.tune_gemms);
  TXC_ASSIGN_OR_RETURN(void *rc, allocate(kGemvMaxRopeHeads * sizeof(unsigned), "rope counters"));
  rope_counters = static_cast<unsigned *>(rc);
  CU(cudaMemset(rc, 0, kGemvMaxRopeHeads * sizeof(unsigned)), path + ": clearing rope counters");
  if (options.decode_gemm) {
    CU(prepareDecodeGemm(), path + ": preparing the decode GEMM kernels");
    decode_gemm_workspace.partial_floats = kDecodeGemmPartialFloats;
    TXC_ASSIGN_OR_RETURN(void *partials, allocate(kDecodeGemmPartialFloats * sizeof(float),
                                                  "decode GEMM partial tiles"));
    decode_gemm_workspace.partials = static_cast<float *>(partials);
    decode_gemm_workspace.num_counters = kDecodeGemmCounters;
    TXC_ASSIGN_OR_RETURN(void *counters,
                         allocate(kDecodeGemmCounters * sizeof(unsigned), "decode GEMM counters"));
    decode_gemm_workspace.counters = static_cast<unsigned *>(counters);
    CU(cudaMemset(counters, 0, kDecodeGemmCounters * sizeof(unsigned)),
       path + ": clearing decode GEMM counters");
  }

  // The cache.
  cache_dtype = artifact::kvCacheDtype(compile);
  TXC_RETURN_IF_ERROR(withContext(path, etype(cache_dtype, "the KV cache").status()));
  uint64_t bytes_per_page = 0;
  for (const auto &[layer, g] : geometry)
    bytes_per_page +=
        static_cast<uint64_t>(2 * page_size * g.first * g.second) * dtypeSize(cache_dtype);
  max_seq_len = static_cast<int32_t>(compile.max_seq_len() > 0 ? compile.max_seq_len() : 4096);
  engine::KvCacheSizing sizing;
  sizing.requested_pages = options.num_kv_pages;
  sizing.budget_bytes = options.kv_cache_budget_bytes;
  sizing.bytes_per_page = bytes_per_page;
  sizing.max_num_seqs = max_num_seqs;
  sizing.max_seq_len = max_seq_len;
  sizing.page_size = page_size;
  StatusOr<int32_t> pages = engine::kvCachePages(sizing);
  TXC_RETURN_IF_ERROR(withContext(path, pages.status()));
  num_pages = pages.value();
  for (const auto &[layer, g] : geometry) {
    uint64_t bytes = static_cast<uint64_t>(num_pages) * 2 * page_size * g.first * g.second *
                     dtypeSize(cache_dtype);
    TXC_ASSIGN_OR_RETURN(void *p,
                         allocate(bytes, "the KV cache of layer " + std::to_string(layer)));
    CU(cudaMemset(p, 0, bytes), path + ": clearing the KV cache");
    caches[layer] = {p, g.first, g.second};
  }
  if (max_heads > 0) {
    kernels::DecodeWorkspaceLayout layout = kernels::decodeWorkspaceLayout(
        static_cast<int>(max_num_seqs), static_cast<int>(max_heads), static_cast<int>(max_kv_heads),
        static_cast<int>(max_head_dim), kMaxDecodeSplits);
    decode_workspace_bytes = layout.total_bytes;
    TXC_ASSIGN_OR_RETURN(void *dw, allocate(decode_workspace_bytes, "decode workspace"));
    decode_workspace = static_cast<unsigned char *>(dw);
    uint64_t counter_bytes = static_cast<uint64_t>(max_num_seqs * max_kv_heads) * 4;
    TXC_ASSIGN_OR_RETURN(void *sc, allocate(counter_bytes, "split counters"));
    split_counters = static_cast<unsigned *>(sc);
    CU(cudaMemset(sc, 0, counter_bytes), path + ": clearing split counters");
  }
  if (options.trace_decode_steps) {
    TXC_ASSIGN_OR_RETURN(void *tr, allocate(kMaxTracedLaunches * kTraceSlotsPerLaunch * sizeof(unsigned long long),
                                            "the decode step trace"));
    d_trace = static_cast<unsigned long long *>(tr);
  }
  device_logits_rows = max_num_seqs;
  TXC_ASSIGN_OR_RETURN(
      void *dl, allocate(static_cast<uint64_t>(device_logits_rows) * vocab_size * 4, "the logits"));
  device_logits = static_cast<float *>(dl);
  TXC_ASSIGN_OR_RETURN(void *dt,
                       allocate(static_cast<uint64_t>(max_num_seqs) * 4, "sampled tokens"));
  device_tokens = static_cast<int32_t *>(dt);
  const size_t argmax_bytes = argmaxWorkspaceBytes(max_num_seqs);
  TXC_ASSIGN_OR_RETURN(argmax_workspace, allocate(argmax_bytes, "the argmax workspace"));
  CU(cudaMemset(argmax_workspace, 0, argmax_bytes), path + ": clearing the argmax workspace");
  CU(cudaMallocHost(&host_tokens, static_cast<size_t>(max_num_seqs) * 4),
     path + ": pinned sampled tokens");
  CU(cudaMallocHost(&ahead.host_tokens, static_cast<size_t>(max_num_seqs) * 4),
     path + ": pinned sampled tokens");
  if (options.device_sampling) {
    size_t sampling_bytes = static_cast<size_t>(max_num_seqs) * sizeof(engine::RowSampling);
    TXC_ASSIGN_OR_RETURN(void *ds, allocate(sampling_bytes, "sampling parameters"));
    device_row_sampling = static_cast<engine::RowSampling *>(ds);
    // Two halves: a step queued ahead stages its rows beside the step before.
    CU(cudaMallocHost(&host_row_sampling, 2 * sampling_bytes), path + ": pinned sampling parameters");
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

// --- the public class ------------------------------------------------------

DecodeAttentionSetup decodeAttentionSetup(const CudaExecutorOptions &options, int64_t heads,
                                          int64_t kv_heads) {
  DecodeAttentionSetup setup;
  const bool small_group = kv_heads > 0 && heads <= 2 * kv_heads;
  setup.rope_in_attention = options.rope_in_attention.value_or(true);
  setup.cluster_combine = options.attention_cluster_combine.value_or(small_group);
  setup.split_min_tokens = options.decode_split_min_tokens > 0 ? options.decode_split_min_tokens
                           : small_group                       ? 64
                                                               : 16;
  setup.warm_fold = options.attention_warm_fold.value_or(small_group);
  return setup;
}

CudaExecutor::CudaExecutor(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaExecutor::~CudaExecutor() = default;

StatusOr<std::unique_ptr<CudaExecutor>>
CudaExecutor::create(const artifact::LoadedArtifact &artifact, const CudaExecutorOptions &options) {
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

std::vector<DecodeTraceEntry> CudaExecutor::lastDecodeTrace() const { return state_->last_trace; }

std::vector<LaunchProfileEntry> CudaExecutor::launchProfile() const {
  std::vector<LaunchProfileEntry> entries;
  for (const auto &[key, entry] : state_->profile_totals)
    entries.push_back(entry);
  return entries;
}

engine::EngineConfig CudaExecutor::engineConfig() const {
  engine::EngineConfig config =
      cpu::engineConfigFor(*state_->artifact, state_->page_size, state_->num_pages);
  // The decode lookahead queues a step only into pages its rows hold.
  config.scheduler.reserve_next_page = state_->options.decode_lookahead;
  return config;
}

} // namespace txc::cuda
