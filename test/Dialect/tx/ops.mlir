// RUN: tx-opt %s | tx-opt | FileCheck %s
// RUN: tx-opt %s --mlir-print-op-generic | tx-opt | FileCheck %s

!cache = !tx.kv_cache<layers = 5, kv_heads = 4, head_dim = 8, page = 16, bf16>

// CHECK-LABEL: func.func @weights
func.func @weights() -> (tensor<64x64xbf16>, tensor<128x64xbf16>) {
  // CHECK: %[[W:.+]] = tx.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
  %wq = tx.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
  %wk = tx.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xbf16>
  %wv = tx.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xbf16>
  // CHECK: tx.concat %[[W]], %{{.+}}, %{{.+}} {dim = 0 : i64} : (tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<128x64xbf16>
  %wqkv = tx.concat %wq, %wk, %wv {dim = 0 : i64}
      : (tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<128x64xbf16>
  return %wq, %wqkv : tensor<64x64xbf16>, tensor<128x64xbf16>
}

// CHECK-LABEL: func.func @embedding_norm_linear
func.func @embedding_norm_linear(%tokens: tensor<?xi32>, %table: tensor<512x64xbf16>,
                                 %nw: tensor<64xbf16>, %w: tensor<32x64xbf16>,
                                 %b: tensor<32xbf16>) -> (tensor<?x32xbf16>, tensor<?x512xf32>) {
  // CHECK: %[[H:.+]] = tx.embedding %{{.+}}, %{{.+}} : (tensor<?xi32>, tensor<512x64xbf16>) -> tensor<?x64xbf16>
  %h = tx.embedding %tokens, %table : (tensor<?xi32>, tensor<512x64xbf16>) -> tensor<?x64xbf16>
  // CHECK: %[[N:.+]] = tx.rms_norm %[[H]], %{{.+}} {eps = 1.000000e-05 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
  %n = tx.rms_norm %h, %nw {eps = 1.0e-5 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
  // CHECK: tx.linear %[[N]], %{{.+}} bias %{{.+}} : (tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
  %y = tx.linear %n, %w bias %b : (tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
  // CHECK: tx.linear %[[N]], %{{.+}} : (tensor<?x64xbf16>, tensor<512x64xbf16>) -> tensor<?x512xf32>
  %logits = tx.linear %n, %table : (tensor<?x64xbf16>, tensor<512x64xbf16>) -> tensor<?x512xf32>
  return %y, %logits : tensor<?x32xbf16>, tensor<?x512xf32>
}

// CHECK-LABEL: func.func @head_norm
func.func @head_norm(%q: tensor<?x64xbf16>, %w: tensor<8xbf16>) -> tensor<?x64xbf16> {
  // CHECK: tx.rms_norm %{{.+}}, %{{.+}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x64xbf16>, tensor<8xbf16>
  %y = tx.rms_norm %q, %w {eps = 1.0e-6 : f64} : tensor<?x64xbf16>, tensor<8xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @rotary
func.func @rotary(%q: tensor<?x64xbf16>, %pos: tensor<?xi32>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>) {
  // CHECK: tx.rotary %{{.+}}, %{{.+}} {head_dim = 8 : i64, rope = #tx.rope<theta = 1.000000e+04>} : tensor<?x64xbf16>, tensor<?xi32>
  %a = tx.rotary %q, %pos {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  // CHECK: rope = #tx.rope<theta = 5.000000e+05, scaling = llama3, factor = 8.000000e+00, original_max_position = 8192>
  %b = tx.rotary %q, %pos {head_dim = 8 : i64,
      rope = #tx.rope<theta = 5.0e5, scaling = llama3, factor = 8.0, low_freq_factor = 1.0,
                      high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x64xbf16>, tensor<?xi32>
  // CHECK: rope = #tx.rope<theta = 1.000000e+04, scaling = yarn, factor = 4.000000e+00, original_max_position = 32768, attention_factor = 1.100000e+00, rotary_dim = 4>
  %c = tx.rotary %q, %pos {head_dim = 8 : i64,
      rope = #tx.rope<theta = 1.0e4, scaling = yarn, factor = 4.0, original_max_position = 32768,
                      attention_factor = 1.1, rotary_dim = 4>}
      : tensor<?x64xbf16>, tensor<?xi32>
  return %a, %b, %c : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @rope_scalings
// CHECK-SAME: #tx.rope<theta = 1.000000e+06, scaling = dynamic, factor = 2.000000e+00, original_max_position = 4096>
// CHECK-SAME: #tx.rope<theta = 1.000000e+04, scaling = linear, factor = 2.000000e+00>
func.func @rope_scalings() attributes {
    linear = #tx.rope<theta = 1.0e4, scaling = linear, factor = 2.0>,
    dynamic = #tx.rope<theta = 1.0e6, scaling = dynamic, factor = 2.0, original_max_position = 4096>} {
  return
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME: !tx.kv_cache<layers = 5, kv_heads = 4, head_dim = 8, page = 16, bf16>
// CHECK-SAME: !tx.batch
func.func @attention(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>,
                     %cache: !cache, %batch: !tx.batch) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  // CHECK: tx.attention %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {causal, head_dim = 8 : i64, layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, scale = 0.35355339059327373 : f64}
  %o = tx.attention %q, %k, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
       scale = 0.35355339059327373 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  // CHECK: tx.attention
  // CHECK-SAME: logit_softcap = 5.000000e+01 : f64
  // CHECK-SAME: sliding_window = 4096 : i64
  %w = tx.attention %q, %k, %v, %cache, %batch
      {layer = 4 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
       scale = 0.125 : f64, causal, sliding_window = 4096 : i64, logit_softcap = 50.0 : f64}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %o, %w : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<?x172xf32>, %b: tensor<?x172xf32>) -> tensor<?x172xf32> {
  // CHECK: tx.silu %{{.+}} : tensor<?x172xf32>
  // CHECK: tx.gelu %{{.+}} : tensor<?x172xf32>
  // CHECK: tx.gelu_tanh %{{.+}} : tensor<?x172xf32>
  // CHECK: tx.add %{{.+}}, %{{.+}} : tensor<?x172xf32>
  // CHECK: tx.mul %{{.+}}, %{{.+}} : tensor<?x172xf32>
  // CHECK: tx.swiglu %{{.+}}, %{{.+}} : tensor<?x172xf32>
  %0 = tx.silu %a : tensor<?x172xf32>
  %1 = tx.gelu %0 : tensor<?x172xf32>
  %2 = tx.gelu_tanh %1 : tensor<?x172xf32>
  %3 = tx.add %2, %b : tensor<?x172xf32>
  %4 = tx.mul %3, %b : tensor<?x172xf32>
  %5 = tx.swiglu %4, %b : tensor<?x172xf32>
  return %5 : tensor<?x172xf32>
}

// CHECK-LABEL: func.func @plumbing
func.func @plumbing(%h: tensor<?x128xbf16>, %batch: !tx.batch) -> (tensor<?x64xbf16>, tensor<?x128xbf16>) {
  // CHECK: %{{.+}}:3 = tx.split %{{.+}} {dim = 1 : i64} : (tensor<?x128xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>)
  %q, %k, %v = tx.split %h {dim = 1 : i64}
      : (tensor<?x128xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>)
  // CHECK: tx.gather_last %{{.+}}, %{{.+}} : (tensor<?x128xbf16>, !tx.batch) -> tensor<?x128xbf16>
  %last = tx.gather_last %h, %batch : (tensor<?x128xbf16>, !tx.batch) -> tensor<?x128xbf16>
  // CHECK: tx.all_reduce %{{.+}} {group_size = 2 : i64} : tensor<?x128xbf16>
  %s = tx.all_reduce %last {group_size = 2 : i64} : tensor<?x128xbf16>
  return %q, %s : tensor<?x64xbf16>, tensor<?x128xbf16>
}
