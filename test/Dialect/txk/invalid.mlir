// RUN: tx-opt %s -split-input-file -verify-diagnostics

func.func @f(%x: tensor<?x64xf32>, %w: tensor<32x48xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{input dim 1 (64) does not match weight dim 1 (48)}}
  %y = txk.gemm %x, %w {algo = "cpu", epilogue = #txk<epilogue none>} : (tensor<?x64xf32>, tensor<32x48xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{result dim 1 (32) must be 16}}
  %y = txk.gemm %x, %w {algo = "cpu", epilogue = #txk<epilogue swiglu>} : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{a residual operand is needed exactly when the epilogue is residual_add}}
  %y = txk.gemm %x, %w {algo = "cpu", epilogue = #txk<epilogue residual_add>} : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %b: tensor<16xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{bias size 16 does not match weight rows 32}}
  %y = txk.gemm %x, %w bias %b {algo = "cpu", epilogue = #txk<epilogue none>} : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<16xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%qkv: tensor<?x48xf32>, %pos: tensor<?xi32>, %c: !cache, %b: !tx.batch) -> tensor<?x32xf32> {
  // expected-error @+1 {{qkv width (48) must be (4 + 2 x 2) heads x head_dim 8}}
  %q = txk.rope_append %qkv, %pos, %c, %b
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>}
      : (tensor<?x48xf32>, tensor<?xi32>, !cache, !tx.batch) -> tensor<?x32xf32>
  return %q : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%qkv: tensor<?x64xf32>, %pos: tensor<?xi32>, %c: !cache, %b: !tx.batch, %n: tensor<8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{q_norm and k_norm come together}}
  %q = txk.rope_append %qkv, %pos, %c, %b q_norm %n
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>, norm_eps = 1.0e-6 : f64}
      : (tensor<?x64xf32>, tensor<?xi32>, !cache, !tx.batch, tensor<8xf32>) -> tensor<?x32xf32>
  return %q : tensor<?x32xf32>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64x48xf32>, %pos: tensor<?xi32>, %c: !cache, %b: !tx.batch) -> tensor<?x32xf32> {
  // expected-error @+1 {{input dim 1 (64) does not match weight dim 1 (48)}}
  %q = txk.gemm_rope_append %x, %w, %pos, %c, %b
      {algo = "cpu", layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>}
      : (tensor<?x64xf32>, tensor<64x48xf32>, tensor<?xi32>, !cache, !tx.batch) -> tensor<?x32xf32>
  return %q : tensor<?x32xf32>
}
