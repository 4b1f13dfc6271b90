//===- AttentionLaunch.cpp - The attention op and the deferred rope --------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include <algorithm>

namespace txc::cuda {

namespace {

// Without PDL the next kernel launches after this one anyway: at the start.
kernels::DecodeParams::Dependents decodeDependents(const CudaExecutorOptions &options) {
  using Dependents = kernels::DecodeParams::Dependents;
  if (!options.attention_pdl)
    return Dependents::kAtStart;
  switch (options.attention_dependents) {
  case CudaExecutorOptions::AttentionDependents::kAfterWait:
    return Dependents::kAfterWait;
  case CudaExecutorOptions::AttentionDependents::kAfterTiles:
    return Dependents::kAfterTiles;
  case CudaExecutorOptions::AttentionDependents::kAtStart:
    break;
  }
  return Dependents::kAtStart;
}

} // namespace

// A deferred rope that the attention did not fold in runs now.
Status CudaExecutor::State::flushPendingRope() {
  if (!pending_rope.active)
    return Status::ok();
  pending_rope.active = false;
  return cudaStatus(launchRopeAppend(pending_rope.args, stream), "rope kernel launch");
}

Status CudaExecutor::State::attention(const LaunchAttributes &attributes, const DMatrix &query,
                                      const LayerCache &cache, const DMatrix &out) {
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
    return invalidArgument("attention query " + shapeString(query.rows, query.cols) + " must be " +
                           shapeString(batch->numTokens(), heads * head_dim));
  if (out.rows != query.rows || out.cols != query.cols)
    return invalidArgument("attention result must match the query");
  if (cache.kv_heads != kv_heads || cache.head_dim != head_dim)
    return invalidArgument("KV cache layer holds " + std::to_string(cache.kv_heads) + " heads of " +
                           std::to_string(cache.head_dim));
  int32_t seqs = batch->numSequences(), tokens = batch->numTokens();
  ablated_out_proj_input = options.ablate_decode_out_proj && tokens == seqs ? out.data : nullptr;
  using Ablation = CudaExecutorOptions::DecodeAttentionAblation;
  if (tokens == seqs && options.ablate_decode_attention != Ablation::kNone) {
    pending_rope.active = false; // neither the rope nor the attention runs
    if (options.ablate_decode_attention == Ablation::kNoLaunch)
      return Status::ok();
    return cudaStatus(launchEmptyKernel(options.attention_pdl, takeTraceSlots("empty kernel"), stream),
                      "empty kernel launch");
  }
  // The pending rope produced this query for this cache layer: the decode
  // kernel folds it in; otherwise it runs first.
  const RopeAppendArgs &rope = pending_rope.args;
  const bool fold_rope =
      pending_rope.active && tokens == seqs && rope.out == query.data && rope.cache == cache.data &&
      heads / kv_heads >= kernels::kMinGroupForMmaDecode && rope.head_dim == head_dim &&
      rope.heads == heads && rope.kv_heads == kv_heads && rope.step_factors != nullptr &&
      rope_factor_rows == seqs;
  if (!fold_rope)
    TXC_RETURN_IF_ERROR(flushPendingRope());

  bool library = options.use_attention_library &&
                 (cache_dtype == DType::kBF16 || cache_dtype == DType::kF16) &&
                 query.dtype == cache_dtype && out.dtype == cache_dtype &&
                 (page_size & (page_size - 1)) == 0;
  if (library) {
    kernels::AttentionConfig config;
    config.dtype =
        cache_dtype == DType::kBF16 ? kernels::ElementType::kBf16 : kernels::ElementType::kFp16;
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
    kv.num_pages = num_pages; // the pool, zeroed when allocated (KVCacheView::num_pages)
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
      p.programmatic_launch = options.attention_pdl;
      p.carveout_percent = options.attention_carveout_percent;
      p.kv_before_wait = options.attention_pdl && options.attention_early_kv;
      p.dependents = decodeDependents(options);
      p.diagnostic_fold_passes = std::max(1, options.attention_fold_passes);
      p.warm_fold = decode_attention.warm_fold;
      p.cluster_combine = decode_attention.cluster_combine;
      p.cluster_max_splits = options.attention_cluster_max_splits;
      int splits = 1;
      // At most kMaxDecodeSplits (the workspace), and chunks of at least
      // decode_attention.split_min_tokens, which only matter below 1k tokens of
      // context, where one CTA per KV head would walk the whole context alone.
      status = kernels::planDecodeSplits(config, seqs, p.num_qo_heads, p.num_kv_heads,
                                         graph_context > 0 ? graph_context : max_context, &splits,
                                         decode_attention.split_min_tokens, kMaxDecodeSplits,
                                         options.decode_min_splits);
      if (status.isOk()) {
        splits = std::max(1, std::min(splits, kMaxDecodeSplits));
        if (seqs > max_num_seqs)
          splits = 1;
        // The wide CTA: the whole (short) context in one tile, nothing to merge.
        const int64_t planned_context = graph_context > 0 ? graph_context : max_context;
        p.wide_cta = options.decode_wide_cta && planned_context <= options.decode_wide_cta_max_keys &&
                     kernels::decodeWideCtaBuilt(static_cast<int>(head_dim),
                                                 static_cast<int>(heads / kv_heads), variant) &&
                     static_cast<int64_t>(kv_heads) * seqs <= static_cast<int64_t>(num_sms);
        if (p.wide_cta) {
          splits = 1;
          p.cluster_combine = false;
        }
        if (splits > 1) {
          kernels::DecodeWorkspaceLayout layout = kernels::decodeWorkspaceLayout(
              seqs, p.num_qo_heads, p.num_kv_heads, static_cast<int>(head_dim), splits);
          if (layout.total_bytes > decode_workspace_bytes) {
            splits = 1;
          } else {
            p.maybe_partial_o =
                reinterpret_cast<float *>(decode_workspace + layout.partial_o_offset);
            p.maybe_partial_lse =
                reinterpret_cast<float *>(decode_workspace + layout.partial_lse_offset);
            p.maybe_split_counters = split_counters;
          }
        }
        p.num_splits = splits;
        // One K/V stage where each split's chunk fits one tile (the pipeline
        // would stay empty) and the CTAs one wave (the launch then asks for
        // the carveout of one CTA an SM). Over two waves it lost at a
        // 2000-token Llama-3-8B prompt (device run 73: its second wave cost
        // more than the GEMVs after it won back).
        const int64_t chunk = (planned_context + splits - 1) / splits;
        p.single_kv_stage = options.decode_single_kv_stage &&
                            chunk <= kernels::kDecodeMmaTileKeys &&
                            static_cast<int64_t>(splits) * kv_heads * seqs <=
                                static_cast<int64_t>(num_sms);
        if (fold_rope) {
          p.maybe_rope_qkv = rope.qkv;
          p.rope_qkv_batch_stride = (rope.heads + 2 * rope.kv_heads) * rope.head_dim;
          p.rope_slot_mapping = rope.slot_mapping;
          p.rope_factors = rope.step_factors;
          p.rope_half = static_cast<int>(rope.half);
          p.maybe_q_norm = rope.q_norm;
          p.maybe_k_norm = rope.k_norm;
          p.rope_norm_eps = rope.norm_eps;
        }
        p.maybe_trace = takeTraceSlots("decode attention");
        status = kernels::launchPagedDecode(config, p, stream);
        if (status.isOk() && fold_rope)
          pending_rope.active = false;
      }
    } else {
      kernels::PrefillParams p;
      p.q = query.data;
      p.q_token_stride = query.cols;
      p.q_head_stride = head_dim;
      p.num_q_tokens = query.rows;
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
    // Unsupported variant: the simple kernel below, after the rope.
  }
  TXC_RETURN_IF_ERROR(flushPendingRope());
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

} // namespace txc::cuda
