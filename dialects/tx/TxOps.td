//===- TxOps.td - tx operations ----------------------------*- tablegen -*-===//
//
// Shape rules live in each op's verifier (TxOps.cpp), and every diagnostic
// names the operands it compares.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_DIALECTS_TX_TXOPS_TD
#define TXC_DIALECTS_TX_TXOPS_TD

include "dialects/tx/TxDialect.td"
include "dialects/tx/TxAttrs.td"
include "dialects/tx/TxTypes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Tx_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
def Tx_Activation : TensorRankOf<[BF16, F16, F32], [2]>;
def Tx_TokenIds : TensorRankOf<[I32], [1]>;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Tx_WeightOp : Tx_Op<"weight", [Pure]> {
  let summary = "a checkpoint tensor, referenced by name";
  let description = [{
    Yields the tensor stored under `name` in the model's checkpoint. The
    result type is its exact shape and dtype; the artifact writer checks it
    against the safetensors header. Weights are never copied by the
    compiler: the runtime maps them from the artifact's weight blob.

    Under tensor parallelism (`tx-shard`) a weight may be a slice:
    `shard_dim` and `shard_parts` cut the checkpoint tensor into equal parts
    along one dimension, and rank `r` of `tp` reads part
    `r * shard_parts / tp` (so fewer parts than ranks replicate).

    ```mlir
    %w = tx.weight "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xbf16>
    %wk = tx.weight "model.layers.0.self_attn.k_proj.weight" {shard_dim = 0 : i64, shard_parts = 2 : i64}
        : tensor<512x4096xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$shard_dim,
                       OptionalAttr<I64Attr>:$shard_parts);
  let results = (outs Tx_FloatTensor:$result);
  let builders = [
    // A whole checkpoint tensor: what the frontend builds.
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$name), [{
      build($_builder, $_state, type, $_builder.getStringAttr(name), ::mlir::IntegerAttr(),
            ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tx_ConcatOp : Tx_Op<"concat", [Pure]> {
  let summary = "concatenation along one dimension";
  let description = [{
    `result = concat(inputs..., dim)`. All inputs have the same rank and
    element type and agree on every other dimension. The projection-fusion
    pass uses it on weights, which the artifact writer then stores already
    concatenated.

    ```mlir
    %wqkv = tx.concat %wq, %wk, %wv {dim = 0 : i64}
        : (tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<128x64xbf16>
    ```
  }];
  let arguments = (ins Variadic<Tx_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tx_ScaleColumnsOp : Tx_Op<"scale_columns", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "a weight matrix with each column scaled by one element of a vector";
  let description = [{
    `result[o, i] = input[o, i] * scale[i]`, computed in fp32 and rounded
    once to the element type. `tx-fold-norm-weight` uses it to move an
    RMSNorm's weight into the linears that read the norm; the artifact
    writer stores the scaled weight (a stripped artifact scales it at load).

    ```mlir
    %wn = tx.scale_columns %w, %gamma : tensor<64x32xbf16>, tensor<32xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F16, F32], [2]>:$input,
                       TensorRankOf<[BF16, F16, F32], [1]>:$scale);
  let results = (outs TensorRankOf<[BF16, F16, F32], [2]>:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` type($input) `,` type($scale)";
  let hasVerifier = 1;
}

def Tx_SplitOp : Tx_Op<"split", [Pure]> {
  let summary = "splitting one tensor into consecutive slices along one dimension";
  let description = [{
    The inverse of `tx.concat`: result `i` is the slice of `input` along
    `dim` that starts where result `i-1` ends. The slice sizes are the
    results' sizes along `dim` and must add up to the input's.

    ```mlir
    %q, %k, %v = tx.split %qkv {dim = 1 : i64}
        : (tensor<?x128xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>)
    ```
  }];
  let arguments = (ins Tx_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Variadic<Tx_FloatTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Embedding, normalisation, projections
//===----------------------------------------------------------------------===//

def Tx_EmbeddingOp : Tx_Op<"embedding", [Pure]> {
  let summary = "token embedding lookup";
  let description = [{
    `result[t, :] = table[tokens[t], :]`.

    ```mlir
    %h = tx.embedding %tokens, %table
        : (tensor<?xi32>, tensor<512x64xbf16>) -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_TokenIds:$tokens, TensorRankOf<[BF16, F16, F32], [2]>:$table);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "$tokens `,` $table attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Tx_RmsNormOp : Tx_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over each group of the last dimension";
  let description = [{
    The last dimension of `input` is cut into groups of `G = dim(weight)`
    elements (one group for a hidden state; one per head for Qwen3's q/k
    norm on `[tokens, heads * head_dim]`). For each group `x`:
    `y = x / sqrt(mean(x^2) + eps) * weight`, computed in fp32. Without a
    weight (`tx-fold-norm-weight` moved it into the linears that read the
    result) the whole row is one group and `y = x / sqrt(mean(x^2) + eps)`.

    ```mlir
    %y = tx.rms_norm %x, %w {eps = 1.0e-06 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
    %z = tx.rms_norm %x {eps = 1.0e-06 : f64} : tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_Activation:$input, Optional<TensorRankOf<[BF16, F16, F32], [1]>>:$weight,
                       F64Attr:$eps);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "$input (`,` $weight^)? attr-dict `:` type($input) (`,` type($weight)^)?";
  let hasVerifier = 1;
}

def Tx_LinearOp : Tx_Op<"linear", [Pure]> {
  let summary = "a projection y = x W^T (+ b)";
  let description = [{
    `result[t, o] = sum_i input[t, i] * weight[o, i] + bias[o]`, with the
    weight in the checkpoint's `[out_features, in_features]` layout and the
    bias optional. Accumulation is in fp32; the result is either the input's
    element type or f32 (the lm_head's logits).

    ```mlir
    %q = tx.linear %x, %wq bias %bq
        : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_Activation:$input, TensorRankOf<[BF16, F16, F32], [2]>:$weight,
                       Optional<TensorRankOf<[BF16, F16, F32], [1]>>:$bias);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Rotary embedding and attention
//===----------------------------------------------------------------------===//

def Tx_RotaryOp : Tx_Op<"rotary", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding, applied per head";
  let description = [{
    `input` is `[tokens, heads * head_dim]`. For each head and each pair
    `(x1, x2) = (x[i], x[i + R/2])` of the first `R = rotary_dim` dimensions
    (HF's rotate-half layout), with `a = positions[t] * inv_freq[i]`:
    `y1 = x1 cos a - x2 sin a`, `y2 = x2 cos a + x1 sin a`. The frequencies
    and their scaling come from `rope`.

    ```mlir
    %qr = tx.rotary %q, %positions {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e+04>}
        : tensor<?x64xbf16>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Tx_Activation:$input, Tx_TokenIds:$positions,
                       I64Attr:$head_dim, Tx_RopeAttr:$rope);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` type($input) `,` type($positions)";
  let hasVerifier = 1;
}

def Tx_AttentionOp : Tx_Op<"attention"> {
  let summary = "causal multi-head attention over a paged KV cache";
  let description = [{
    Appends this step's keys and values to layer `layer` of `cache`, at the
    positions `batch` gives, then for every query token `t` of sequence `s`
    and every head `h` (KV head `h / (num_heads / num_kv_heads)`, so GQA and
    MQA share keys):

    `result[t, h] = softmax(cap(q[t, h] . K[s, j]^T * scale) + mask) @ V[s, j]`

    over the cached tokens `j` of `s`, where `cap(x) = c * tanh(x / c)` when
    `logit_softcap = c` is set, and `mask` hides `j > pos(t)` when `causal`
    and `j <= pos(t) - sliding_window` when `sliding_window` is set. Softmax
    runs in fp32.

    ```mlir
    %o = tx.attention %q, %k, %v, %cache, %batch
        {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64,
         head_dim = 8 : i64, scale = 0.35355339059327373 : f64, causal}
        : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>,
           !tx.kv_cache<layers = 5, kv_heads = 4, head_dim = 8, page = 16, bf16>, !tx.batch)
        -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_Activation:$query, Tx_Activation:$key, Tx_Activation:$value,
                       Arg<Tx_KvCacheType, "the cache appended to and read",
                           [MemRead, MemWrite]>:$cache,
                       Tx_BatchType:$batch,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$sliding_window,
                       OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Tx_UnaryOp<string mnemonic, string math>
    : Tx_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # mnemonic;
  let description = "`y = " # math # "`, computed in fp32.\n\n"
      # "```mlir\n%y = tx." # mnemonic # " %x : tensor<?x64xbf16>\n```";
  let arguments = (ins Tx_FloatTensor:$input);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tx_SiluOp : Tx_UnaryOp<"silu", "x * sigmoid(x)">;
def Tx_GeluOp : Tx_UnaryOp<"gelu", "0.5 * x * (1 + erf(x / sqrt(2)))">;
def Tx_GeluTanhOp : Tx_UnaryOp<"gelu_tanh",
    "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))">;

class Tx_BinaryOp<string mnemonic, string math, list<Trait> traits = []>
    : Tx_Op<mnemonic, !listconcat([Pure, Elementwise, SameOperandsAndResultType], traits)> {
  let summary = "elementwise " # mnemonic;
  let description = "`y = " # math # "`. Both operands have the result's type.\n\n"
      # "```mlir\n%y = tx." # mnemonic # " %a, %b : tensor<?x64xbf16>\n```";
  let arguments = (ins Tx_FloatTensor:$lhs, Tx_FloatTensor:$rhs);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Tx_AddOp : Tx_BinaryOp<"add", "a + b", [Commutative]>;
def Tx_MulOp : Tx_BinaryOp<"mul", "a * b", [Commutative]>;
def Tx_SwigluOp : Tx_BinaryOp<"swiglu", "silu(gate) * up"> {
  let arguments = (ins Tx_FloatTensor:$gate, Tx_FloatTensor:$up);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Sequence and parallelism plumbing
//===----------------------------------------------------------------------===//

def Tx_GatherLastOp : Tx_Op<"gather_last", [Pure]> {
  let summary = "each sequence's last token";
  let description = [{
    `result[s, :] = input[cu_seqlens[s + 1] - 1, :]`: the rows the lm_head
    needs, one per sequence of `batch`.

    ```mlir
    %last = tx.gather_last %h, %batch : (tensor<?x64xbf16>, !tx.batch) -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_Activation:$input, Tx_BatchType:$batch);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "$input `,` $batch attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Tx_AllReduceOp : Tx_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "sum across the ranks of a tensor-parallel group";
  let description = [{
    `result = sum over ranks r of input_r`, over `group_size` ranks. A group
    of one rank is the identity and folds away.

    ```mlir
    %s = tx.all_reduce %partial {group_size = 2 : i64} : tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Tx_FloatTensor:$input, I64Attr:$group_size);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Fused forms, produced by the tx-fuse-* passes
//===----------------------------------------------------------------------===//

def Tx_AddRmsNormOp : Tx_Op<"add_rms_norm", [Pure]> {
  let summary = "residual add followed by RMSNorm, with both results";
  let description = [{
    `sum = lhs + rhs; normed = rms_norm(sum, weight, eps)`. The residual
    stream needs `sum`, the next projection `normed`; one kernel produces
    both while the row is in registers. The weight is absent where
    `tx-fold-norm-weight` moved it into the linears that read `normed`.

    ```mlir
    %sum, %y = tx.add_rms_norm %h, %o, %w {eps = 1.0e-05 : f64}
        : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
    ```
  }];
  let arguments = (ins Tx_Activation:$lhs, Tx_Activation:$rhs,
                       Optional<TensorRankOf<[BF16, F16, F32], [1]>>:$weight, F64Attr:$eps);
  let results = (outs Tx_Activation:$sum, Tx_Activation:$normed);
  let assemblyFormat = "$lhs `,` $rhs (`,` $weight^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tx_RopeAppendOp : Tx_Op<"rope_append", [AttrSizedOperandSegments]> {
  let summary = "q/k norm and rotary embedding, fused with the KV-cache append";
  let description = [{
    Per head, optionally `q = rms_norm(q, q_norm)` and `k = rms_norm(k,
    k_norm)` (Qwen3), then `q = rotary(q)` and `k = rotary(k)` at
    `positions`; K and V are appended to layer `layer` of `cache` and the
    rotated Q is returned. `tx.paged_attention` then reads the cache.

    ```mlir
    %qr = tx.rope_append %q, %k, %v, %pos, %cache, %batch
        {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
         rope = #tx.rope<theta = 1.0e+04>}
        : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>,
           !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>, !tx.batch)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Tx_Activation:$query, Tx_Activation:$key, Tx_Activation:$value,
                       Tx_TokenIds:$positions,
                       Arg<Tx_KvCacheType, "the cache appended to", [MemWrite]>:$cache,
                       Tx_BatchType:$batch,
                       Optional<TensorRankOf<[BF16, F16, F32], [1]>>:$q_norm,
                       Optional<TensorRankOf<[BF16, F16, F32], [1]>>:$k_norm,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, Tx_RopeAttr:$rope, OptionalAttr<F64Attr>:$norm_eps);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions `,` $cache `,` $batch
    (`q_norm` $q_norm^)? (`k_norm` $k_norm^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Tx_PagedAttentionOp : Tx_Op<"paged_attention"> {
  let summary = "attention over a KV cache that already holds this step's keys";
  let description = [{
    `tx.attention` without the append: the math of `tx.attention`, reading
    K and V of layer `layer` from `cache`.

    ```mlir
    %o = tx.paged_attention %qr, %cache, %batch
        {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
         scale = 0.35355339059327373 : f64, causal}
        : (tensor<?x64xf32>, !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>, !tx.batch)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Tx_Activation:$query,
                       Arg<Tx_KvCacheType, "the cache read", [MemRead]>:$cache,
                       Tx_BatchType:$batch,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$sliding_window,
                       OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs Tx_Activation:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

#endif // TXC_DIALECTS_TX_TXOPS_TD
