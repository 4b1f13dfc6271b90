// RUN: tx-opt %s -tx-fold-norm-weight -split-input-file | FileCheck %s

// A norm read by one fused QKV linear: its weight scales the linear's
// columns and leaves the norm.
// CHECK-LABEL: func.func @rms_norm_into_linear
// CHECK-DAG: %[[G:.+]] = tx.weight "input_layernorm"
// CHECK-DAG: %[[W:.+]] = tx.concat
// CHECK: %[[Y:.+]] = tx.rms_norm %{{[^,]+}} {eps = {{.+}} : f64} : tensor<?x64xbf16>{{$}}
// CHECK-NEXT: %[[WG:.+]] = tx.scale_columns %[[W]], %[[G]] : tensor<96x64xbf16>, tensor<64xbf16>
// CHECK-NEXT: tx.linear %[[Y]], %[[WG]]
func.func @rms_norm_into_linear(%x: tensor<?x64xbf16>) -> tensor<?x96xbf16> {
  %g = tx.weight "input_layernorm" : tensor<64xbf16>
  %wq = tx.weight "q" : tensor<64x64xbf16>
  %wk = tx.weight "k" : tensor<32x64xbf16>
  %w = tx.concat %wq, %wk {dim = 0 : i64} : (tensor<64x64xbf16>, tensor<32x64xbf16>) -> tensor<96x64xbf16>
  %y = tx.rms_norm %x, %g {eps = 1.0e-6 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
  %qk = tx.linear %y, %w : (tensor<?x64xbf16>, tensor<96x64xbf16>) -> tensor<?x96xbf16>
  return %qk : tensor<?x96xbf16>
}

// -----

// add_rms_norm read by two linears, one of them twice over the same weight:
// each weight is scaled once.
// CHECK-LABEL: func.func @add_rms_norm_into_linears
// CHECK-DAG: %[[G:.+]] = tx.weight "post_attention_layernorm"
// CHECK-DAG: %[[A:.+]] = tx.weight "a"
// CHECK-DAG: %[[B:.+]] = tx.weight "b"
// CHECK: %[[SUM:.+]], %[[Y:.+]] = tx.add_rms_norm %{{.+}}, %{{.+}} {eps = 1.000000e-05 : f64} : (tensor<?x64xf32>, tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK-NEXT: %[[AG:.+]] = tx.scale_columns %[[A]], %[[G]]
// CHECK-NEXT: tx.linear %[[Y]], %[[AG]]
// CHECK-NEXT: %[[BG:.+]] = tx.scale_columns %[[B]], %[[G]]
// CHECK-NEXT: tx.linear %[[Y]], %[[BG]]
// CHECK-NEXT: tx.linear %[[Y]], %[[BG]]
// CHECK-NOT: tx.scale_columns
func.func @add_rms_norm_into_linears(%h: tensor<?x64xf32>, %o: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %g = tx.weight "post_attention_layernorm" : tensor<64xf32>
  %a = tx.weight "a" : tensor<16x64xf32>
  %b = tx.weight "b" : tensor<32x64xf32>
  %sum, %y = tx.add_rms_norm %h, %o, %g {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  %p = tx.linear %y, %a : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  %q = tx.linear %y, %b : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %r = tx.linear %y, %b : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  return %sum, %p, %q, %r : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// A tied lm_head: the table is the embedding's too, so scaling it would
// store a second copy. Nothing folds.
// CHECK-LABEL: func.func @tied_lm_head
// CHECK: tx.rms_norm %{{.+}}, %{{.+}} {eps
// CHECK-NOT: tx.scale_columns
func.func @tied_lm_head(%ids: tensor<?xi32>, %x: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x256xf32>) {
  %g = tx.weight "norm" : tensor<64xbf16>
  %table = tx.weight "embed_tokens" : tensor<256x64xbf16>
  %e = tx.embedding %ids, %table : (tensor<?xi32>, tensor<256x64xbf16>) -> tensor<?x64xbf16>
  %y = tx.rms_norm %x, %g {eps = 1.0e-6 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
  %logits = tx.linear %y, %table : (tensor<?x64xbf16>, tensor<256x64xbf16>) -> tensor<?x256xf32>
  return %e, %logits : tensor<?x64xbf16>, tensor<?x256xf32>
}

// -----

// The norm's result has a user other than a linear's input.
// CHECK-LABEL: func.func @other_user
// CHECK: tx.rms_norm %{{.+}}, %{{.+}} {eps
// CHECK-NOT: tx.scale_columns
func.func @other_user(%x: tensor<?x64xf32>) -> (tensor<?x16xf32>, tensor<?x64xf32>) {
  %g = tx.weight "norm" : tensor<64xf32>
  %w = tx.weight "w" : tensor<16x64xf32>
  %y = tx.rms_norm %x, %g {eps = 1.0e-6 : f64} : tensor<?x64xf32>, tensor<64xf32>
  %p = tx.linear %y, %w : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  %s = tx.silu %y : tensor<?x64xf32>
  return %p, %s : tensor<?x16xf32>, tensor<?x64xf32>
}

// -----

// A per-head norm (Qwen3's q/k norm) and a norm whose weight is not a
// checkpoint tensor stay as they are.
// CHECK-LABEL: func.func @per_head_and_argument
// CHECK: tx.rms_norm %{{.+}}, %{{.+}} {eps
// CHECK: tx.rms_norm %{{.+}}, %{{.+}} {eps
// CHECK-NOT: tx.scale_columns
func.func @per_head_and_argument(%x: tensor<?x64xf32>, %g: tensor<64xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %h = tx.weight "q_norm" : tensor<16xf32>
  %w = tx.weight "w" : tensor<16x64xf32>
  %y = tx.rms_norm %x, %h {eps = 1.0e-6 : f64} : tensor<?x64xf32>, tensor<16xf32>
  %p = tx.linear %y, %w : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  %z = tx.rms_norm %x, %g {eps = 1.0e-6 : f64} : tensor<?x64xf32>, tensor<64xf32>
  %w2 = tx.weight "w2" : tensor<16x64xf32>
  %q = tx.linear %z, %w2 : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  return %p, %q : tensor<?x16xf32>, tensor<?x16xf32>
}
