//===- TxkOps.td - txk operations --------------------------*- tablegen -*-===//

#ifndef TXC_DIALECTS_TXK_TXKOPS_TD
#define TXC_DIALECTS_TXK_TXKOPS_TD

include "dialects/txk/TxkDialect.td"
include "dialects/txk/TxkEnums.td"
include "dialects/tx/TxAttrs.td"
include "dialects/tx/TxTypes.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Txk_Tensor : RankedTensorOf<[BF16, F16, F32]>;
def Txk_Matrix : TensorRankOf<[BF16, F16, F32], [2]>;
def Txk_Vector : TensorRankOf<[BF16, F16, F32], [1]>;
def Txk_TokenIds : TensorRankOf<[I32], [1]>;

// Every op may carry `arena_offsets` (one byte offset per result) once
// memory is planned; the verifier of the plan checks them, not each op.

def Txk_EmbeddingOp : Txk_Op<"embedding", [Pure]> {
  let summary = "token embedding gather";
  let description = [{
    `result[t, :] = table[tokens[t] - vocab_start, :]`, and zero for tokens
    outside `[vocab_start, vocab_start + rows(table))` (a vocab-parallel
    shard, summed by the all_reduce that follows).

    ```mlir
    %h = txk.embedding %tokens, %table {vocab_start = 0 : i64}
        : (tensor<?xi32>, tensor<512x64xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_TokenIds:$tokens, Txk_Matrix:$table,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_start);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = "$tokens `,` $table attr-dict `:` functional-type(operands, $result)";
}

def Txk_RmsNormOp : Txk_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm kernel";
  let description = [{
    `y = x / sqrt(mean(x^2) + eps) * weight` per group of `dim(weight)`
    elements of the last axis, in fp32; without a weight (folded into the
    next GEMM's), one group a row and no scale.

    ```mlir
    %y = txk.rms_norm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$input, Optional<Txk_Vector>:$weight, F64Attr:$eps);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = "$input (`,` $weight^)? attr-dict `:` functional-type(operands, $result)";
}

def Txk_AddRmsNormOp : Txk_Op<"add_rms_norm", [Pure]> {
  let summary = "residual add fused with RMSNorm: one kernel, two results";
  let description = [{
    `sum = input + residual; normed = rms_norm(sum, weight, eps)`; the
    weight is absent where it was folded into the next GEMM's.

    ```mlir
    %sum, %y = txk.add_rms_norm %x, %r, %w {eps = 1.0e-05 : f64}
        : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
    ```
  }];
  let arguments = (ins Txk_Matrix:$input, Txk_Matrix:$residual, Optional<Txk_Vector>:$weight, F64Attr:$eps);
  let results = (outs Txk_Matrix:$sum, Txk_Matrix:$normed);
  let assemblyFormat = "$input `,` $residual (`,` $weight^)? attr-dict `:` functional-type(operands, results)";
}

def Txk_GemmOp : Txk_Op<"gemm", [Pure, AttrSizedOperandSegments]> {
  let summary = "GEMM y = x W^T with a fused epilogue";
  let description = [{
    `acc = input @ weight^T (+ bias)` in fp32, then the epilogue:
    `none` stores acc; `residual_add` stores `acc + residual`; `swiglu`
    treats the weight's rows as `[gate; up]` halves and stores
    `silu(acc[:, :n/2]) * acc[:, n/2:]`. The tactic (`algo`: `cublaslt`,
    `gemv` or `cpu`; tile sizes) is chosen per target by convert-tx-to-txk.

    Under tensor parallelism a row-parallel GEMM produces partial sums that
    an all_reduce adds up; `residual_on_first_rank` makes only rank 0 add
    the residual, so the reduced sum holds it once.

    ```mlir
    %h1 = txk.gemm %o, %wo residual %h {epilogue = #txk.epilogue<residual_add>, algo = "cpu"}
        : (tensor<?x64xf32>, tensor<64x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$input, Txk_Matrix:$weight, Optional<Txk_Vector>:$bias,
                       Optional<Txk_Matrix>:$residual, Txk_GemmEpilogueAttr:$epilogue,
                       StrAttr:$algo, OptionalAttr<DenseI64ArrayAttr>:$tile,
                       UnitAttr:$residual_on_first_rank);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? (`residual` $residual^)? attr-dict `:`
    functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Txk_RopeAppendOp : Txk_Op<"rope_append", [AttrSizedOperandSegments]> {
  let summary = "rotary (+ q/k RMSNorm) on packed QKV, then append K and V to the cache";
  let description = [{
    `qkv` is `[tokens, (num_heads + 2 * num_kv_heads) * head_dim]`, Q then K
    then V. Per head: optional RMSNorm with `q_norm` / `k_norm` (Qwen3),
    then the rotary embedding `rope` at `positions`. Rotated K and V are
    written into layer `layer` of `cache` at the slots `batch` assigns; the
    result is rotated Q, `[tokens, num_heads * head_dim]`.

    ```mlir
    %q = txk.rope_append %qkv, %pos, %cache, %batch
        {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
         rope = #tx.rope<theta = 1.0e+04>}
        : (tensor<?x128xf32>, tensor<?xi32>, !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>, !tx.batch)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$qkv, Txk_TokenIds:$positions,
                       Arg<Tx_KvCacheType, "the cache appended to", [MemWrite]>:$cache,
                       Tx_BatchType:$batch,
                       Optional<Txk_Vector>:$q_norm, Optional<Txk_Vector>:$k_norm,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, Tx_RopeAttr:$rope, OptionalAttr<F64Attr>:$norm_eps);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = [{
    $qkv `,` $positions `,` $cache `,` $batch (`q_norm` $q_norm^)? (`k_norm` $k_norm^)?
    attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Txk_GemmRopeAppendOp : Txk_Op<"gemm_rope_append", [AttrSizedOperandSegments]> {
  let summary = "the QKV projection with rope_append as its epilogue";
  let description = [{
    `qkv = input @ weight^T (+ bias)`, then exactly `txk.rope_append` on
    `qkv` (q/k norms, rotary, K/V into the cache), returning rotated Q. A
    decode step is one launch: the GEMV's output tile holds whole heads, so
    the rotation and the cache write happen before anything leaves
    registers. With `algo = "cublaslt"` a prefill step runs the GEMM in
    cuBLASLt and the epilogue as its own kernel.

    ```mlir
    %q = txk.gemm_rope_append %x, %wqkv, %pos, %cache, %batch
        {algo = "cpu", layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64,
         head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e+04>}
        : (tensor<?x64xf32>, tensor<128x64xf32>, tensor<?xi32>,
           !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>, !tx.batch)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$input, Txk_Matrix:$weight, Optional<Txk_Vector>:$bias,
                       Txk_TokenIds:$positions,
                       Arg<Tx_KvCacheType, "the cache appended to", [MemWrite]>:$cache,
                       Tx_BatchType:$batch,
                       Optional<Txk_Vector>:$q_norm, Optional<Txk_Vector>:$k_norm,
                       StrAttr:$algo,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, Tx_RopeAttr:$rope, OptionalAttr<F64Attr>:$norm_eps);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? `,` $positions `,` $cache `,` $batch
    (`q_norm` $q_norm^)? (`k_norm` $k_norm^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Txk_AttentionOp : Txk_Op<"attention"> {
  let summary = "attention of new queries over the paged KV cache";
  let description = [{
    For every query token and head, softmax over the cached keys of its
    sequence (GQA: KV head `h / (num_heads / num_kv_heads)`), masked as in
    `tx.attention`, times the cached values. The cache already holds this
    step's keys. `family` picks the kernel; `tile_q`, `tile_kv` and
    `split_kv` are its tactic (split_kv 0 means chosen at run time from the
    batch, which the compiler cannot see).

    ```mlir
    %o = txk.attention %q, %cache, %batch {layer = 0 : i64, num_heads = 8 : i64,
           num_kv_heads = 4 : i64, head_dim = 8 : i64, scale = 0.35355339059327373 : f64,
           causal, family = #txk.family<reference>}
        : (tensor<?x64xf32>, !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>, !tx.batch)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$query,
                       Arg<Tx_KvCacheType, "the cache read", [MemRead]>:$cache,
                       Tx_BatchType:$batch,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$sliding_window, OptionalAttr<F64Attr>:$logit_softcap,
                       Txk_AttentionFamilyAttr:$family,
                       DefaultValuedAttr<I64Attr, "0">:$tile_q,
                       DefaultValuedAttr<I64Attr, "0">:$tile_kv,
                       DefaultValuedAttr<I64Attr, "0">:$split_kv);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = "$query `,` $cache `,` $batch attr-dict `:` functional-type(operands, $result)";
}

def Txk_GatherLastOp : Txk_Op<"gather_last", [Pure]> {
  let summary = "copy each sequence's last token row";
  let description = [{
    `result[s, :] = input[cu_seqlens[s + 1] - 1, :]`.

    ```mlir
    %l = txk.gather_last %h, %batch : (tensor<?x64xf32>, !tx.batch) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Matrix:$input, Tx_BatchType:$batch);
  let results = (outs Txk_Matrix:$result);
  let assemblyFormat = "$input `,` $batch attr-dict `:` functional-type(operands, $result)";
}

def Txk_AllReduceOp : Txk_Op<"all_reduce", [Pure]> {
  let summary = "in-place sum across tensor-parallel ranks (NCCL, or in-process on the CPU)";
  let description = [{
    ```mlir
    %s = txk.all_reduce %x {group_size = 2 : i64} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Txk_Tensor:$input, I64Attr:$group_size);
  let results = (outs Txk_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, $result)";
}

#endif // TXC_DIALECTS_TXK_TXKOPS_TD
