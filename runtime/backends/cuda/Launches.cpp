//===- Launches.cpp - One txk op to kernels --------------------------------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"
#include "runtime/backends/cuda/StagedGemv.h"

#include <algorithm>

namespace txc::cuda {

// out = input @ weight^T (+ bias) (+ residual), fp32 accumulation: on our
// kernels where tryGemv takes it, else on cuBLASLt (CublasGemm.h).
Status CudaExecutor::State::gemm(const DMatrix &input, const DMatrix &weight, const DMatrix &bias,
                                 const DMatrix &residual, const DMatrix &out) {
  int64_t m = input.rows, k = input.cols, n = weight.rows;
  if (weight.cols != k)
    return invalidArgument("gemm input " + shapeString(m, k) + " and weight " +
                           shapeString(weight.rows, weight.cols) + " disagree on K");
  if (out.rows != m || out.cols != n)
    return invalidArgument("gemm result " + shapeString(out.rows, out.cols) + " must be " +
                           shapeString(m, n));
  if (residual.present() &&
      (residual.dtype != out.dtype || residual.rows != m || residual.cols != n))
    return unimplemented("gemm residual must have the result's shape and dtype");
  if (bias.present() && bias.rows * bias.cols != n)
    return invalidArgument("gemm bias must have " + std::to_string(n) + " elements");
  if (ablated_out_proj_input && input.data == ablated_out_proj_input) {
    ablated_out_proj_input = nullptr;
    return Status::ok();
  }
  TXC_ASSIGN_OR_RETURN(
      bool done,
      tryGemv(input, weight, bias, residual,
              residual.present() ? GemvEpilogue::kResidualAdd : GemvEpilogue::kNone, out));
  if (done)
    return Status::ok();
  TXC_RETURN_IF_ERROR(flushPendingNorm());
  return cublas.run(m, n, k, {input.data, input.dtype}, {weight.data, weight.dtype},
                    {bias.data, bias.dtype}, {residual.data, residual.dtype}, out.data, out.dtype,
                    stream);
}

// The decode-sized GEMMs (16-bit, one dtype throughout) run on our kernels
// with the epilogue fused: m <= gemvRowLimit(k) on Gemv.cu (which can also
// take the deferred norm and the rotary epilogue), larger m up to
// skinnyGemmRowLimit(k) on SkinnyGemm.cu with use_skinny_gemm, and beyond
// that up to 64 rows on DecodeGemm.cu with decode_gemm. False leaves the
// GEMM to cuBLASLt.
StatusOr<bool> CudaExecutor::State::tryGemv(const DMatrix &input, const DMatrix &weight,
                                            const DMatrix &bias, const DMatrix &residual,
                                            GemvEpilogue epilogue, const DMatrix &out,
                                            const RopeAppendArgs *rope) {
  if (!options.use_gemv || input.dtype != weight.dtype ||
      (residual.present() && residual.dtype != out.dtype))
    return false;
  const bool skinny = input.rows > std::min(options.gemv_max_rows, gemvRowLimit(input.cols));
  const bool wide =
      skinny && (!options.use_skinny_gemm || input.rows > skinnyGemmRowLimit(input.cols));
  if (skinny && (rope || (wide && (!options.decode_gemm || input.rows > kDecodeGemmMaxRows))))
    return false;
  GemvArgs g;
  g.x = input.data;
  const PendingNorm &norm = pending_norm;
  if (norm.active && !skinny) {
    // The input is the deferred norm's result: read the norm's input instead.
    if (norm.out.data != input.data || norm.input.dtype != input.dtype ||
        norm.input.cols != input.cols ||
        overlaps(norm.input.data, norm.input.bytes(), out.data, out.bytes()))
      return false;
    g.x = norm.input.data;
    g.norm = true;
    if (norm.weight.present()) { // absent: folded into `weight` (tx-fold-norm-weight)
      g.norm_weight = norm.weight.data;
      TXC_ASSIGN_OR_RETURN(g.norm_type, etype(norm.weight.dtype, "the norm weight"));
    }
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
  g.late_dependents = options.gemv_after_attention_late_dependents && after_attention;
  g.carveout_percent = qkv_gemv ? options.qkv_carveout_percent : options.gemv_carveout_percent;
  if (wide) {
    if (!decodeGemmSupports(g))
      return false;
    TXC_RETURN_IF_ERROR(flushPendingNorm()); // x is the norm's result
    TXC_RETURN_IF_ERROR(
        cudaStatus(launchDecodeGemm(g, decode_gemm_workspace, stream), "decode GEMM launch"));
    return true;
  }
  if (skinny) {
    if (!skinnyGemmSupports(g))
      return false;
    TXC_RETURN_IF_ERROR(flushPendingNorm()); // x is the norm's result
    TXC_RETURN_IF_ERROR(cudaStatus(launchSkinnyGemm(g, stream), "skinny GEMM launch"));
    return true;
  }
  if (rope) {
    g.rope = *rope;
    g.rope_counters = rope_counters;
  }
  if (!gemvSupports(g))
    return false;
  const GemvShapeConfig *configured = nullptr; // the last one given for this shape
  for (const GemvShapeConfig &c : options.gemv_configs)
    if (c.n == g.n && c.k == g.k)
      configured = &c;
  using StagedGemvs = CudaExecutorOptions::StagedGemvs;
  const bool staged = options.staged_gemvs == StagedGemvs::kAll ||
                      (options.staged_gemvs == StagedGemvs::kQkv && qkv_gemv);
  if (staged && !configured && stagedGemvSupports(g, options.staged_gemv_max_bytes)) {
    g.trace = takeTraceSlots("staged gemv");
    TXC_RETURN_IF_ERROR(cudaStatus(launchStagedGemv(g, stream), "staged gemv launch"));
    pending_norm.active = false;
    return true;
  }
  const GemvConfig config =
      configured ? GemvConfig{configured->warps_per_block, configured->unroll, configured->target_warps_per_sm}
                 : gemvConfigFor(g.n, g.k);
  g.trace = takeTraceSlots("gemv");
  TXC_RETURN_IF_ERROR(cudaStatus(launchGemvWithConfig(g, config, stream), "gemv launch"));
  pending_norm.active = false;
  return true;
}

Status CudaExecutor::State::launchNorm(const DMatrix &input, const DMatrix *residual,
                                       const DMatrix &weight, float eps, const DMatrix *sum,
                                       const DMatrix &out) {
  TXC_ASSIGN_OR_RETURN(EType it, etype(input.dtype, "the input"));
  EType wt = it; // no weight: folded into the next GEMM's
  if (weight.present()) {
    TXC_ASSIGN_OR_RETURN(wt, etype(weight.dtype, "the weight"));
  }
  TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
  EType rt = EType::kF32, st = EType::kF32;
  if (residual) {
    TXC_ASSIGN_OR_RETURN(rt, etype(residual->dtype, "the residual"));
  }
  if (sum) {
    TXC_ASSIGN_OR_RETURN(st, etype(sum->dtype, "the sum"));
  }
  return cudaStatus(launchRmsNorm(input.data, it, residual ? residual->data : nullptr, rt,
                                  weight.data, wt,
                                  weight.present() ? weight.rows * weight.cols : input.cols, input.rows,
                                  input.cols, eps, sum ? sum->data : nullptr, st, out.data, ot,
                                  stream, options.use_pdl),
                    "kernel launch");
}

// A deferred norm whose GEMM did not take it runs now, before the GEMM.
Status CudaExecutor::State::flushPendingNorm() {
  if (!pending_norm.active)
    return Status::ok();
  pending_norm.active = false;
  return launchNorm(pending_norm.input, nullptr, pending_norm.weight, pending_norm.eps, nullptr,
                    pending_norm.out);
}

// --- running ---------------------------------------------------------------

Status CudaExecutor::State::runLaunch(int index, const pb::Launch &launch) {
  const std::string &op = launch.op();
  LaunchAttributes attributes(launch);
  copy_scratch_used = 0;
  const std::string kernel = "kernel launch";
  if (op != "txk.gemm" && op != "txk.gemm_rope_append")
    TXC_RETURN_IF_ERROR(flushPendingNorm());
  if (op != "txk.attention")
    TXC_RETURN_IF_ERROR(flushPendingRope());

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
    // The step's rotary factors, when enqueueLaunches chose this first
    // kernel to compute them.
    StepRopeFactors factors;
    if (index == 0 && rope_factor_rows > 0) {
      factors = step_rope_factors;
      factors.positions = d_positions;
    }
    return cudaStatus(launchEmbedding(d_tokens, batch->numTokens(), table.data, tt, table.rows,
                                      table.cols, attributes.getIntOr("vocab_start", 0), out.data,
                                      ot, factors, stream),
                      kernel);
  }
  if (op == "txk.rms_norm" || op == "txk.add_rms_norm") {
    bool add = op == "txk.add_rms_norm";
    TXC_ASSIGN_OR_RETURN(DMatrix input, floatOperand(launch, 0, true));
    DMatrix residual;
    if (add) {
      TXC_ASSIGN_OR_RETURN(residual, floatOperand(launch, 1, true));
    }
    // Absent where the compiler folded it into the next GEMM's weights.
    TXC_ASSIGN_OR_RETURN(DMatrix weight, floatOperand(launch, add ? 2 : 1, false));
    TXC_ASSIGN_OR_RETURN(double eps, attributes.getFloat("eps"));
    DMatrix sum;
    if (add) {
      TXC_ASSIGN_OR_RETURN(sum, bindResult(launch, 0, input.rows));
    }
    TXC_ASSIGN_OR_RETURN(DMatrix out, bindResult(launch, add ? 1 : 0, input.rows));
    int64_t group = weight.present() ? weight.rows * weight.cols : input.cols;
    if (group <= 0 || input.cols % group != 0 || out.cols != input.cols)
      return invalidArgument("rms_norm weight of " + std::to_string(group) +
                             " elements does not divide rows of " + std::to_string(input.cols));
    if (add &&
        (residual.rows != input.rows || residual.cols != input.cols || sum.cols != input.cols))
      return invalidArgument("add_rms_norm residual and sum must match the input");
    if (!add && fusable_norms.count(index) &&
        input.rows <= std::min(options.gemv_max_rows, gemvRowLimit(input.cols)) &&
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
        return resourceExhausted("GEMM scratch too small for " + shapeString(acc.rows, acc.cols));
      if (out.cols != weight.rows / 2)
        return invalidArgument("swiglu result must have weight rows / 2 columns");
      if (!overlaps(input.data, input.bytes(), out.data, out.bytes())) {
        TXC_ASSIGN_OR_RETURN(bool done,
                             tryGemv(input, weight, bias, DMatrix{}, GemvEpilogue::kSwiglu, out));
        if (done)
          return Status::ok();
      }
      // An fp32 GEMM output needs an fp32 bias in cuBLASLt's bias epilogue.
      TXC_RETURN_IF_ERROR(gemm(input, weight, bias, DMatrix{}, acc));
      TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
      return cudaStatus(launchSwiglu(static_cast<float *>(acc.data), acc.rows, weight.rows / 2,
                                     out.data, ot, stream),
                        kernel);
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
      CU(cudaMemcpyAsync(tmp.data, residual.data, residual.bytes(), cudaMemcpyDeviceToDevice,
                         stream),
         "residual copy");
    TXC_RETURN_IF_ERROR(gemm(input, weight, bias, residual.present() ? tmp : DMatrix{}, tmp));
    return cudaStatus(
        cudaMemcpyAsync(out.data, tmp.data, out.bytes(), cudaMemcpyDeviceToDevice, stream),
        "result copy");
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
    DMatrix qkv, input, weight, bias;
    if (fused) {
      TXC_ASSIGN_OR_RETURN(input, floatOperand(launch, 0, true));
      TXC_ASSIGN_OR_RETURN(weight, floatOperand(launch, 1, true));
      TXC_ASSIGN_OR_RETURN(bias, floatOperand(launch, 2, false));
      // QKV rounded to the result dtype, as the unfused pair computes.
      qkv = DMatrix{gemm_scratch, out.dtype, input.rows, weight.rows};
      if (qkv.bytes() > gemm_scratch_bytes)
        return resourceExhausted("GEMM scratch too small for QKV");
    } else {
      TXC_ASSIGN_OR_RETURN(qkv, floatOperand(launch, 0, true));
      if (overlaps(qkv.data, qkv.bytes(), out.data, out.bytes())) {
        TXC_ASSIGN_OR_RETURN(qkv, copyToScratch(qkv));
      }
    }
    if (qkv.cols != (a.heads + 2 * a.kv_heads) * a.head_dim || qkv.rows != rows ||
        out.cols != a.heads * a.head_dim)
      return invalidArgument("qkv " + shapeString(qkv.rows, qkv.cols) + " / result " +
                             shapeString(out.rows, out.cols) + " do not match the heads");
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
    a.step_factors = table.step_factors;
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
    if (fused) {
      // Decode-sized: the GEMV finishes each head itself (no rope launch).
      if (options.fuse_rope && input.cols == weight.cols &&
          !overlaps(input.data, input.bytes(), out.data, out.bytes())) {
        TXC_ASSIGN_OR_RETURN(bool done,
                             tryGemv(input, weight, bias, DMatrix{}, GemvEpilogue::kNone, qkv, &a));
        if (done)
          return Status::ok();
      }
      qkv_gemv = true; // its carveout is the QKV's
      Status status = gemm(input, weight, bias, DMatrix{}, qkv);
      qkv_gemv = false;
      TXC_RETURN_IF_ERROR(status);
    }
    // Decode: the attention after it may fold the rope in (same element
    // type for the QKV, the norms and the cache).
    if (decode_attention.rope_in_attention && fusable_ropes.count(index) &&
        batch->numTokens() == batch->numSequences() && a.qkv_type == a.cache_type &&
        (!a.q_norm || a.q_norm_type == a.cache_type) &&
        (!a.k_norm || a.k_norm_type == a.cache_type)) {
      pending_rope = {true, a};
      return Status::ok();
    }
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
      TXC_RETURN_IF_ERROR(flushPendingRope()); // the copy needs the query written
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
    // One token a sequence (decode): row s is sequence s's last token
    // already. No launch; later launches read the input (identityGathers,
    // which also checked that both sides hold the same element type).
    if (identity_gathers.count(index) && batch->numTokens() == batch->numSequences()) {
      gather_aliases[launch.results(0).arena().offset()] = input;
      return Status::ok();
    }
    if (overlaps(input.data, input.bytes(), out.data, out.bytes())) {
      TXC_ASSIGN_OR_RETURN(input, copyToScratch(input));
    }
    TXC_ASSIGN_OR_RETURN(EType it, etype(input.dtype, "the input"));
    TXC_ASSIGN_OR_RETURN(EType ot, etype(out.dtype, "the result"));
    return cudaStatus(launchGatherLast(input.data, it, input.cols, d_qso, batch->numSequences(),
                                       out.data, ot, stream),
                      kernel);
  }
  return unimplemented("unknown op for the CUDA backend");
}

} // namespace txc::cuda
