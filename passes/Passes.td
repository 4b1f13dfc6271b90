//===- Passes.td - txc passes ------------------------------*- tablegen -*-===//
//
// Every txc pass, with its documentation; docs/passes/ is generated from
// this file. Flags carry the prefix of the dialect they work on.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_PASSES_PASSES_TD
#define TXC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def TxFuseSwigluPass : Pass<"tx-fuse-swiglu", "mlir::func::FuncOp"> {
  let summary = "Fuse silu(gate) * up into tx.swiglu";
  let description = [{
    Rewrites `tx.mul(tx.silu(%gate), %up)` (in either operand order) into
    `tx.swiglu %gate, %up`, which lowers to one kernel instead of two and
    never materialises silu(gate). The rewrite does not fire when the silu
    result has other uses, since those would still need it.

    ```mlir
    %s = tx.silu %g : tensor<?x172xf32>
    %m = tx.mul %s, %u : tensor<?x172xf32>
    // becomes
    %m = tx.swiglu %g, %u : tensor<?x172xf32>
    ```
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def TxFuseProjectionsPass : Pass<"tx-fuse-projections", "mlir::func::FuncOp"> {
  let summary = "Fuse sibling tx.linear ops on the same input into one";
  let description = [{
    Linears that read the same activation (Q/K/V; gate/up) become one
    linear over the row-wise concatenation of their weights (and biases),
    followed by a `tx.split` that hands each old user its slice. One GEMM
    with a wider N reads the activation once and fills the GPU better than
    three narrow ones. The artifact writer stores concatenated weights
    already concatenated.

    Linears do not fuse when their result element types differ or when only
    some of them carry a bias.

    ```mlir
    %q = tx.linear %x, %wq : ...
    %k = tx.linear %x, %wk : ...
    // becomes
    %w = tx.concat %wq, %wk {dim = 0 : i64} : ...
    %qk = tx.linear %x, %w : ...
    %q, %k = tx.split %qk {dim = 1 : i64} : ...
    ```
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def TxFuseAddRmsNormPass : Pass<"tx-fuse-add-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Fuse a residual add and the RMSNorm that reads it";
  let description = [{
    `tx.rms_norm(tx.add(a, b))` becomes `tx.add_rms_norm a, b`, whose two
    results are the sum (for the residual stream) and the normalised value.
    It does not fire for a per-head norm (weight narrower than the row), or
    when another user of the sum comes before the norm.
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def TxFuseRotaryPass : Pass<"tx-fuse-rotary", "mlir::func::FuncOp"> {
  let summary = "Fuse rotary embeddings and q/k norms with the KV-cache append";
  let description = [{
    `tx.attention(rotary(q), rotary(k), v)` becomes `tx.rope_append`, which
    rotates Q and K and appends K and V to the cache in one kernel, and
    `tx.paged_attention`, which reads the cache. Per-head RMSNorms on Q and
    K that feed the rotaries (Qwen3) fuse too. Nothing fires when a rotary
    result has other users, or Q and K rotate with different parameters.
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def TxFoldNormWeightPass : Pass<"tx-fold-norm-weight", "mlir::func::FuncOp"> {
  let summary = "Fold an RMSNorm's weight into the linears that read the norm";
  let description = [{
    `linear(rms_norm(x, g), W) = linear(rms_norm(x), W * g)`, with `g`
    scaling W's columns. Where every user of a whole-row norm (`tx.rms_norm`
    or `tx.add_rms_norm`) is a `tx.linear` that reads it as its input, the
    norm's weight moves into each of those linears' weights as a
    `tx.scale_columns`, which the artifact writer stores already scaled
    (rounded once), and the norm keeps no weight. The decode GEMV that takes
    the norm then reads only the norm's input after its wait, not the input
    and `g` (half its input bytes).

    It does not fire for a per-head norm, when a linear's weight has other
    users (a tied lm_head shares the embedding table: folding would store a
    second copy), or when the weights are not checkpoint tensors or
    concatenations of them.

    ```mlir
    %y = tx.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
    %q = tx.linear %y, %w : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
    // becomes
    %y = tx.rms_norm %x {eps = 1.0e-06 : f64} : tensor<?x64xbf16>
    %wg = tx.scale_columns %w, %g : tensor<32x64xbf16>, tensor<64xbf16>
    %q = tx.linear %y, %wg : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
    ```
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def TxShardPass : Pass<"tx-shard", "mlir::ModuleOp"> {
  let summary = "Megatron-style tensor parallelism: rewrite the step for one of tp ranks";
  let description = [{
    Q/K/V and gate/up projections become column-parallel (each rank owns a
    slice of the output rows of the weight), o_proj and down_proj
    row-parallel (a slice of the input columns), followed by a
    `tx.all_reduce`. Attention heads are divided across ranks; when there
    are fewer KV heads than ranks, KV heads are replicated. The embedding
    and lm_head stay replicated: at the vocabulary sizes of the supported
    models the all-gather they would need costs more than it saves at
    decode time. A head count that `tp` does not divide is an error.

    Weights record their slice as `shard_dim` / `shard_parts`: rank `r` of
    `tp` reads part `r * shard_parts / tp`.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "number of tensor-parallel ranks">
  ];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

def ConvertTxToTxkPass : Pass<"convert-tx-to-txk", "mlir::func::FuncOp"> {
  let summary = "Lower tx to txk: one op per kernel launch, with tactics";
  let description = [{
    Chooses, per target, how each tx op runs:
    - a linear whose result is only added to the residual stream becomes a
      GEMM with a `residual_add` epilogue; a fused gate/up linear feeding
      `tx.swiglu` becomes a GEMM with a `swiglu` epilogue;
    - `tx.rope_append` reads the packed QKV projection directly;
    - `tx.paged_attention` picks its kernel family and tiles
      (`reference` on `cpu`; `sm90_prefill` with 128x128 tiles for head
      dims up to 128 and 128x64 for 256 on `sm_90a`, the split-KV factor of
      the decode kernel left to the run-time heuristic, which sees the batch);
    - the GEMM algorithm is `cpu` on `cpu` and `cublaslt` on `sm_90a`.

    A tx op it cannot lower is an error naming the op.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or sm_90a">
  ];
  let dependentDialects = ["::txc::tx::TxDialect", "::txc::txk::TxkDialect"];
}

def TxkPlanMemoryPass : Pass<"txk-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Give every txk result an offset in one activation arena";
  let description = [{
    Each txk result holds at most `max-batch-tokens` rows (`max-seqs` after
    `txk.gather_last`). Buffers whose live ranges (definition to last use,
    in program order) do not overlap share memory; offsets are assigned
    largest first, first fit, aligned to 256 bytes. `txk.all_reduce` works
    in place. Each op gets `arena_offsets` and `arena_bytes` (the room each
    result may fill); the function gets
    `txk.arena_size`, `txk.max_batch_tokens` and `txk.max_seqs`.
  }];
  let options = [
    Option<"maxBatchTokens", "max-batch-tokens", "int64_t", "2048",
           "most tokens in one step">,
    Option<"maxSeqs", "max-seqs", "int64_t", "256", "most sequences in one step">
  ];
  let dependentDialects = ["::txc::txk::TxkDialect"];
}

#endif // TXC_PASSES_PASSES_TD
