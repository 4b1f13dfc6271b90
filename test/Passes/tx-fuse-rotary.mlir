// RUN: tx-opt %s -tx-fuse-rotary -split-input-file | FileCheck %s

!cache = !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, page = 16, bf16>

// CHECK-LABEL: func.func @llama
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x64xbf16>, %[[K:[^:]+]]: tensor<?x32xbf16>, %[[V:[^:]+]]: tensor<?x32xbf16>, %[[P:[^:]+]]: tensor<?xi32>, %[[C:[^:]+]]: !tx.kv_cache
// CHECK-NOT: tx.rotary
// CHECK: %[[R:.+]] = tx.rope_append %[[Q]], %[[K]], %[[V]], %[[P]], %[[C]], %{{[^ ]+}} {head_dim = 16 : i64, layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, rope = #tx.rope<theta = 1.000000e+04>}
// CHECK: %[[O:.+]] = tx.paged_attention %[[R]], %[[C]], %{{[^ ]+}} {causal, head_dim = 16 : i64, layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, sliding_window = 6 : i64}
// CHECK: return %[[O]]
func.func @llama(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                 %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  %qr = tx.rotary %q, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  %kr = tx.rotary %k, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x32xbf16>, tensor<?xi32>
  %o = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64,
       causal, sliding_window = 6 : i64}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// Qwen3: the per-head q/k norms fuse as well.
// CHECK-LABEL: func.func @qwen3
// CHECK-SAME: %[[QN:[^:]+]]: tensor<16xbf16>, %[[KN:[^:]+]]: tensor<16xbf16>
// CHECK-NOT: tx.rms_norm
// CHECK: tx.rope_append {{.*}} q_norm %[[QN]] k_norm %[[KN]] {{.*}}norm_eps = 9.9999999999999995E-7 : f64
// CHECK: tx.paged_attention
func.func @qwen3(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                 %cache: !cache, %batch: !tx.batch, %qnw: tensor<16xbf16>, %knw: tensor<16xbf16>) -> tensor<?x64xbf16> {
  %qn = tx.rms_norm %q, %qnw {eps = 1.0e-6 : f64} : tensor<?x64xbf16>, tensor<16xbf16>
  %kn = tx.rms_norm %k, %knw {eps = 1.0e-6 : f64} : tensor<?x32xbf16>, tensor<16xbf16>
  %qr = tx.rotary %qn, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e6>} : tensor<?x64xbf16>, tensor<?xi32>
  %kr = tx.rotary %kn, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e6>} : tensor<?x32xbf16>, tensor<?xi32>
  %o = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, page = 16, bf16>

// The rotated query is also returned: the rotary must stay.
// CHECK-LABEL: func.func @rotary_other_use
// CHECK: tx.rotary
// CHECK: tx.attention
// CHECK-NOT: tx.rope_append
func.func @rotary_other_use(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                            %cache: !cache, %batch: !tx.batch) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %qr = tx.rotary %q, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  %kr = tx.rotary %k, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x32xbf16>, tensor<?xi32>
  %o = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o, %qr : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// Q and K rotate with different parameters: not one fused rotation.
// CHECK-LABEL: func.func @different_rope
// CHECK: tx.attention
// CHECK-NOT: tx.rope_append
func.func @different_rope(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                          %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  %qr = tx.rotary %q, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  %kr = tx.rotary %k, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 5.0e5>} : tensor<?x32xbf16>, tensor<?xi32>
  %o = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// Keys are not rotated here.
// CHECK-LABEL: func.func @key_not_rotated
// CHECK: tx.attention
// CHECK-NOT: tx.rope_append
func.func @key_not_rotated(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                           %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  %qr = tx.rotary %q, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  %o = tx.attention %qr, %k, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}
