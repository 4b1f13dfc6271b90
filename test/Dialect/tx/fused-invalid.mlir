// RUN: tx-opt %s -split-input-file -verify-diagnostics
//
// The verifier rules of the fused ops the tx-fuse-* passes produce.

func.func @f(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %w: tensor<32xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{weight size (32) must equal the hidden size (64)}}
  %s, %y = tx.add_rms_norm %a, %b, %w {eps = 1.0e-5 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<32xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  return %y : tensor<?x64xf32>
}

// -----

func.func @f(%a: tensor<?x64xf32>, %b: tensor<?x64xbf16>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{lhs type 'tensor<?x64xf32>' does not match rhs type 'tensor<?x64xbf16>'}}
  %s, %y = tx.add_rms_norm %a, %b, %w {eps = 1.0e-5 : f64}
      : (tensor<?x64xf32>, tensor<?x64xbf16>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  return %y : tensor<?x64xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>,
             %c: !cache, %b: !tx.batch, %n: tensor<8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{q_norm and k_norm must be given together}}
  %r = tx.rope_append %q, %k, %v, %p, %c, %b q_norm %n
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64,
       rope = #tx.rope<theta = 1.0e4>, norm_eps = 1.0e-6 : f64}
      : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, !cache, !tx.batch, tensor<8xf32>) -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>,
             %c: !cache, %b: !tx.batch, %n: tensor<4xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{q_norm has 4 elements, expected head_dim 8}}
  %r = tx.rope_append %q, %k, %v, %p, %c, %b q_norm %n k_norm %n
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64,
       rope = #tx.rope<theta = 1.0e4>, norm_eps = 1.0e-6 : f64}
      : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, !cache, !tx.batch, tensor<4xf32>, tensor<4xf32>) -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>,
             %c: !cache, %b: !tx.batch, %n: tensor<8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{q/k norms need a positive norm_eps}}
  %r = tx.rope_append %q, %k, %v, %p, %c, %b q_norm %n k_norm %n
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64,
       rope = #tx.rope<theta = 1.0e4>}
      : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, !cache, !tx.batch, tensor<8xf32>, tensor<8xf32>) -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%q: tensor<?x24xf32>, %c: !cache, %b: !tx.batch) -> tensor<?x24xf32> {
  // expected-error @+1 {{query dim 1 (24) must be 4 heads x head_dim 8 = 32}}
  %o = tx.paged_attention %q, %c, %b
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x24xf32>, !cache, !tx.batch) -> tensor<?x24xf32>
  return %o : tensor<?x24xf32>
}

// -----

func.func @f() -> tensor<4x8xf32> {
  // expected-error @+1 {{weight 'w' needs shard_dim and shard_parts together}}
  %w = tx.weight "w" {shard_dim = 0 : i64} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @f() -> tensor<4x8xf32> {
  // expected-error @+1 {{weight 'w' has shard_dim 2 and shard_parts 2; need 0 <= shard_dim < rank and shard_parts >= 1}}
  %w = tx.weight "w" {shard_dim = 2 : i64, shard_parts = 2 : i64} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}
