// RUN: tx-opt %s -split-input-file -verify-diagnostics
//
// One case per verifier rule of the tx dialect; each must fail with its own
// message.

func.func @f() -> tensor<4xbf16> {
  // expected-error @+1 {{weight name must not be empty}}
  %w = tx.weight "" : tensor<4xbf16>
  return %w : tensor<4xbf16>
}

// -----

func.func @f() -> tensor<?xbf16> {
  // expected-error @+1 {{weight 'w' must have a static shape}}
  %w = tx.weight "w" : tensor<?xbf16>
  return %w : tensor<?xbf16>
}

// -----

func.func @f() -> tensor<4xbf16> {
  // expected-error @+1 {{needs at least one input}}
  %c = tx.concat {dim = 0 : i64} : () -> tensor<4xbf16>
  return %c : tensor<4xbf16>
}

// -----

func.func @f(%a: tensor<2x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{dim 2 is out of range for result of rank 2}}
  %c = tx.concat %a, %a {dim = 2 : i64} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
  return %c : tensor<4x4xbf16>
}

// -----

func.func @f(%a: tensor<2x4xbf16>, %b: tensor<8xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{input #1 has rank 1 but result has rank 2}}
  %c = tx.concat %a, %b {dim = 0 : i64} : (tensor<2x4xbf16>, tensor<8xbf16>) -> tensor<4x4xbf16>
  return %c : tensor<4x4xbf16>
}

// -----

func.func @f(%a: tensor<2x4xbf16>, %b: tensor<2x4xf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{input #1 element type 'f16' does not match result element type 'bf16'}}
  %c = tx.concat %a, %b {dim = 0 : i64} : (tensor<2x4xbf16>, tensor<2x4xf16>) -> tensor<4x4xbf16>
  return %c : tensor<4x4xbf16>
}

// -----

func.func @f(%a: tensor<2x4xbf16>, %b: tensor<2x3xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{input #1 dim 1 (3) does not match result dim 1 (4)}}
  %c = tx.concat %a, %b {dim = 0 : i64} : (tensor<2x4xbf16>, tensor<2x3xbf16>) -> tensor<4x4xbf16>
  return %c : tensor<4x4xbf16>
}

// -----

func.func @f(%a: tensor<2x4xbf16>) -> tensor<5x4xbf16> {
  // expected-error @+1 {{input sizes along dim 0 add up to 4 but result has 5}}
  %c = tx.concat %a, %a {dim = 0 : i64} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<5x4xbf16>
  return %c : tensor<5x4xbf16>
}

// -----

func.func @f(%a: tensor<?x8xbf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{result sizes along dim 1 add up to 6 but input has 8}}
  %x, %y = tx.split %a {dim = 1 : i64} : (tensor<?x8xbf16>) -> (tensor<?x4xbf16>, tensor<?x2xbf16>)
  return %x : tensor<?x4xbf16>
}

// -----

func.func @f(%a: tensor<?x8xbf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{result #0 element type 'f32' does not match input element type 'bf16'}}
  %x, %y = tx.split %a {dim = 1 : i64} : (tensor<?x8xbf16>) -> (tensor<?x4xf32>, tensor<?x4xbf16>)
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%t: tensor<?xi32>, %e: tensor<16x8xbf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{result dim 1 (4) does not match table dim 1 (8)}}
  %h = tx.embedding %t, %e : (tensor<?xi32>, tensor<16x8xbf16>) -> tensor<?x4xbf16>
  return %h : tensor<?x4xbf16>
}

// -----

func.func @f(%t: tensor<3xi32>, %e: tensor<16x8xbf16>) -> tensor<5x8xbf16> {
  // expected-error @+1 {{result dim 0 (5) does not match tokens dim 0 (3)}}
  %h = tx.embedding %t, %e : (tensor<3xi32>, tensor<16x8xbf16>) -> tensor<5x8xbf16>
  return %h : tensor<5x8xbf16>
}

// -----

func.func @f(%t: tensor<?xi32>, %e: tensor<16x8xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{result element type 'f32' does not match table element type 'bf16'}}
  %h = tx.embedding %t, %e : (tensor<?xi32>, tensor<16x8xbf16>) -> tensor<?x8xf32>
  return %h : tensor<?x8xf32>
}

// -----

func.func @f(%t: tensor<?xi64>, %e: tensor<16x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{operand #0 must be 1D tensor of 32-bit signless integer values}}
  %h = tx.embedding %t, %e : (tensor<?xi64>, tensor<16x8xbf16>) -> tensor<?x8xbf16>
  return %h : tensor<?x8xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{eps must be positive, got 0}}
  %y = tx.rms_norm %x, %w {eps = 0.0 : f64} : tensor<?x8xbf16>, tensor<8xbf16>
  return %y : tensor<?x8xbf16>
}

// -----

func.func @f(%x: tensor<?x12xbf16>, %w: tensor<8xbf16>) -> tensor<?x12xbf16> {
  // expected-error @+1 {{input dim 1 (12) is not a multiple of weight dim 0 (8)}}
  %y = tx.rms_norm %x, %w {eps = 1.0e-5 : f64} : tensor<?x12xbf16>, tensor<8xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

func.func @f(%x: tensor<?x12xbf16>, %w: tensor<?xbf16>) -> tensor<?x12xbf16> {
  // expected-error @+1 {{weight must have a static, non-zero size}}
  %y = tx.rms_norm %x, %w {eps = 1.0e-5 : f64} : tensor<?x12xbf16>, tensor<?xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x6xbf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{input dim 1 (8) does not match weight dim 1 (6)}}
  %y = tx.linear %x, %w : (tensor<?x8xbf16>, tensor<4x6xbf16>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<3x8xbf16>, %w: tensor<4x8xbf16>) -> tensor<2x4xbf16> {
  // expected-error @+1 {{result dim 0 (2) does not match input dim 0 (3)}}
  %y = tx.linear %x, %w : (tensor<3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x8xbf16>) -> tensor<?x5xbf16> {
  // expected-error @+1 {{result dim 1 (5) does not match weight dim 0 (4)}}
  %y = tx.linear %x, %w : (tensor<?x8xbf16>, tensor<4x8xbf16>) -> tensor<?x5xbf16>
  return %y : tensor<?x5xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x8xf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{input element type 'bf16' does not match weight element type 'f16'}}
  %y = tx.linear %x, %w : (tensor<?x8xbf16>, tensor<4x8xf16>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x8xbf16>, %b: tensor<5xbf16>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{bias dim 0 (5) does not match weight dim 0 (4)}}
  %y = tx.linear %x, %w bias %b : (tensor<?x8xbf16>, tensor<4x8xbf16>, tensor<5xbf16>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x8xbf16>, %b: tensor<4xf32>) -> tensor<?x4xbf16> {
  // expected-error @+1 {{bias element type 'f32' does not match weight element type 'bf16'}}
  %y = tx.linear %x, %w bias %b : (tensor<?x8xbf16>, tensor<4x8xbf16>, tensor<4xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x8xbf16>, %w: tensor<4x8xbf16>) -> tensor<?x4xf16> {
  // expected-error @+1 {{result element type must be the input's ('bf16') or f32, got 'f16'}}
  %y = tx.linear %x, %w : (tensor<?x8xbf16>, tensor<4x8xbf16>) -> tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

// -----

func.func @f(%x: tensor<?x28xbf16>, %p: tensor<?xi32>) -> tensor<?x28xbf16> {
  // expected-error @+1 {{head_dim must be positive and even, got 7}}
  %y = tx.rotary %x, %p {head_dim = 7 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x28xbf16>, tensor<?xi32>
  return %y : tensor<?x28xbf16>
}

// -----

func.func @f(%x: tensor<?x20xbf16>, %p: tensor<?xi32>) -> tensor<?x20xbf16> {
  // expected-error @+1 {{input dim 1 (20) is not a multiple of head_dim (8)}}
  %y = tx.rotary %x, %p {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x20xbf16>, tensor<?xi32>
  return %y : tensor<?x20xbf16>
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %p: tensor<?xi32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{rope rotary_dim (16) exceeds head_dim (8)}}
  %y = tx.rotary %x, %p {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4, rotary_dim = 16>} : tensor<?x16xbf16>, tensor<?xi32>
  return %y : tensor<?x16xbf16>
}

// -----

func.func @f(%x: tensor<3x16xbf16>, %p: tensor<4xi32>) -> tensor<3x16xbf16> {
  // expected-error @+1 {{positions dim 0 (4) does not match input dim 0 (3)}}
  %y = tx.rotary %x, %p {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<3x16xbf16>, tensor<4xi32>
  return %y : tensor<3x16xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{num_heads (0), num_kv_heads (2) and head_dim (8) must be positive}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 0 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x24xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x24xbf16> {
  // expected-error @+1 {{num_heads (3) is not a multiple of num_kv_heads (2)}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 3 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x24xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x24xbf16>
  return %o : tensor<?x24xbf16>
}

// -----

func.func @f(%q: tensor<?x24xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x24xbf16> {
  // expected-error @+1 {{query dim 1 (24) must be 4 heads x head_dim 8 = 32}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x24xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x24xbf16>
  return %o : tensor<?x24xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x8xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{key dim 1 (8) must be 2 heads x head_dim 8 = 16}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x8xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x24xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{value dim 1 (24) must be 2 heads x head_dim 8 = 16}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x24xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<3x32xbf16>, %k: tensor<4x16xbf16>, %v: tensor<4x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<3x32xbf16> {
  // expected-error @+1 {{key dim 0 (4) does not match query dim 0 (3)}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<3x32xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<3x32xbf16>
  return %o : tensor<3x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{key element type 'f16' does not match query element type 'bf16'}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xf32> {
  // expected-error @+1 {{result type 'tensor<?x32xf32>' must equal query type 'tensor<?x32xbf16>'}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 4, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{cache kv_heads (4) does not match num_kv_heads (2)}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 4, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{cache head_dim (16) does not match head_dim (8)}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{layer 2 is out of range for a cache of 2 layers}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 2 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, f16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{cache element type 'f16' does not match query element type 'bf16'}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, f16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{scale must be positive, got -1}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = -1.0 : f64, causal}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{sliding_window must be positive, got 0}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal, sliding_window = 0 : i64}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%q: tensor<?x32xbf16>, %k: tensor<?x16xbf16>, %v: tensor<?x16xbf16>, %c: !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, %b: !tx.batch) -> tensor<?x32xbf16> {
  // expected-error @+1 {{logit_softcap must be positive, got 0}}
  %o = tx.attention %q, %k, %v, %c, %b {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64, causal, logit_softcap = 0.0 : f64}
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>, !tx.kv_cache<layers = 2, kv_heads = 2, head_dim = 8, page = 16, bf16>, !tx.batch) -> tensor<?x32xbf16>
  return %o : tensor<?x32xbf16>
}

// -----

func.func @f(%h: tensor<?x8xbf16>, %b: !tx.batch) -> tensor<?x4xbf16> {
  // expected-error @+1 {{result dim 1 (4) does not match input dim 1 (8)}}
  %l = tx.gather_last %h, %b : (tensor<?x8xbf16>, !tx.batch) -> tensor<?x4xbf16>
  return %l : tensor<?x4xbf16>
}

// -----

func.func @f(%h: tensor<?x8xbf16>, %b: !tx.batch) -> tensor<?x8xf32> {
  // expected-error @+1 {{result element type 'f32' does not match input element type 'bf16'}}
  %l = tx.gather_last %h, %b : (tensor<?x8xbf16>, !tx.batch) -> tensor<?x8xf32>
  return %l : tensor<?x8xf32>
}

// -----

func.func @f(%h: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{group_size must be at least 1, got 0}}
  %s = tx.all_reduce %h {group_size = 0 : i64} : tensor<?x8xbf16>
  return %s : tensor<?x8xbf16>
}

// -----

func.func @f(%a: tensor<?x8xbf16>, %b: tensor<?x8xf32>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %s = "tx.add"(%a, %b) : (tensor<?x8xbf16>, tensor<?x8xf32>) -> tensor<?x8xbf16>
  return %s : tensor<?x8xbf16>
}

// -----

// expected-error @+1 {{kv_cache layers (0), kv_heads (2), head_dim (8) and page (16) must be positive}}
func.func @f(%c: !tx.kv_cache<layers = 0, kv_heads = 2, head_dim = 8, page = 16, bf16>) {
  return
}

// -----

// expected-error @+1 {{kv_cache element type must be bf16, f16 or f32, got 'i8'}}
func.func @f(%c: !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, i8>) {
  return
}

// -----

// expected-error @+1 {{rope theta must be positive, got 0}}
func.func @f() attributes {rope = #tx.rope<theta = 0.0>} {
  return
}

// -----

// expected-error @+1 {{rope rotary_dim must be even and non-negative, got 3}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, rotary_dim = 3>} {
  return
}

// -----

// expected-error @+1 {{rope linear scaling needs a positive factor, got 0}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = linear, factor = 0.0>} {
  return
}

// -----

// expected-error @+1 {{rope llama3 scaling needs original_max_position > 0}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = llama3, factor = 8.0>} {
  return
}

// -----

// expected-error @+1 {{rope llama3 scaling needs high_freq_factor (1.000000e+00) > low_freq_factor (4.000000e+00)}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position = 8192>} {
  return
}

// -----

// expected-error @+1 {{rope yarn scaling needs beta_fast (1.000000e+00) > beta_slow (3.200000e+01)}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = yarn, factor = 4.0, original_max_position = 4096, beta_fast = 1.0, beta_slow = 32.0>} {
  return
}

// -----

// expected-error @+1 {{rope attention_factor must be non-negative, got -1}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = yarn, factor = 4.0, original_max_position = 4096, attention_factor = -1.0>} {
  return
}

// -----

// expected-error @+2 {{expected one of [default, linear, dynamic, llama3, yarn]}}
// expected-error @+1 {{failed to parse Tx_RopeAttr parameter 'scaling'}}
func.func @f() attributes {rope = #tx.rope<theta = 1.0e4, scaling = ntk>} {
  return
}
