// RUN: tx-opt %s -tx-fuse-projections -split-input-file | FileCheck %s

// Q/K/V with biases (Qwen2): one linear over concatenated weights and
// biases, split back into the three results.
// CHECK-LABEL: func.func @qkv_with_bias
// CHECK-SAME: (%[[X:.+]]: tensor<?x64xbf16>)
// CHECK-DAG: %[[WQ:.+]] = tx.weight "q.weight"
// CHECK-DAG: %[[WK:.+]] = tx.weight "k.weight"
// CHECK-DAG: %[[WV:.+]] = tx.weight "v.weight"
// CHECK-DAG: %[[BQ:.+]] = tx.weight "q.bias"
// CHECK-DAG: %[[W:.+]] = tx.concat %[[WQ]], %[[WK]], %[[WV]] {dim = 0 : i64} : (tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<128x64xbf16>
// CHECK-DAG: %[[B:.+]] = tx.concat %[[BQ]], %{{.+}}, %{{.+}} {dim = 0 : i64} : (tensor<64xbf16>, tensor<32xbf16>, tensor<32xbf16>) -> tensor<128xbf16>
// CHECK: %[[Y:.+]] = tx.linear %[[X]], %[[W]] bias %[[B]] : (tensor<?x64xbf16>, tensor<128x64xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
// CHECK: %[[S:.+]]:3 = tx.split %[[Y]] {dim = 1 : i64} : (tensor<?x128xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>)
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @qkv_with_bias(%x: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>) {
  %wq = tx.weight "q.weight" : tensor<64x64xbf16>
  %bq = tx.weight "q.bias" : tensor<64xbf16>
  %q = tx.linear %x, %wq bias %bq : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16>
  %wk = tx.weight "k.weight" : tensor<32x64xbf16>
  %bk = tx.weight "k.bias" : tensor<32xbf16>
  %k = tx.linear %x, %wk bias %bk : (tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
  %wv = tx.weight "v.weight" : tensor<32x64xbf16>
  %bv = tx.weight "v.bias" : tensor<32xbf16>
  %v = tx.linear %x, %wv bias %bv : (tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
  return %q, %k, %v : tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>
}

// Gate and up without bias.
// CHECK-LABEL: func.func @gate_up
// CHECK: tx.concat %{{.+}}, %{{.+}} {dim = 0 : i64} : (tensor<172x64xf32>, tensor<172x64xf32>) -> tensor<344x64xf32>
// CHECK: tx.linear %{{.+}}, %{{.+}} : (tensor<?x64xf32>, tensor<344x64xf32>) -> tensor<?x344xf32>
// CHECK: tx.split %{{.+}} {dim = 1 : i64} : (tensor<?x344xf32>) -> (tensor<?x172xf32>, tensor<?x172xf32>)
func.func @gate_up(%x: tensor<?x64xf32>) -> tensor<?x172xf32> {
  %wg = tx.weight "gate" : tensor<172x64xf32>
  %wu = tx.weight "up" : tensor<172x64xf32>
  %g = tx.linear %x, %wg : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %u = tx.linear %x, %wu : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %m = tx.swiglu %g, %u : tensor<?x172xf32>
  return %m : tensor<?x172xf32>
}

// -----

// Different inputs: nothing to share.
// CHECK-LABEL: func.func @different_inputs
// CHECK-NOT: tx.concat
// CHECK-COUNT-2: tx.linear
// CHECK-NOT: tx.split
func.func @different_inputs(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %w1 = tx.weight "w1" : tensor<8x64xf32>
  %w2 = tx.weight "w2" : tensor<8x64xf32>
  %a = tx.linear %x, %w1 : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
  %b = tx.linear %y, %w2 : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
  return %a, %b : tensor<?x8xf32>, tensor<?x8xf32>
}

// Only one of them has a bias.
// CHECK-LABEL: func.func @mixed_bias
// CHECK-NOT: tx.concat
// CHECK-COUNT-2: tx.linear
func.func @mixed_bias(%x: tensor<?x64xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %w1 = tx.weight "w1" : tensor<8x64xf32>
  %b1 = tx.weight "b1" : tensor<8xf32>
  %w2 = tx.weight "w2" : tensor<8x64xf32>
  %a = tx.linear %x, %w1 bias %b1 : (tensor<?x64xf32>, tensor<8x64xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %b = tx.linear %x, %w2 : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
  return %a, %b : tensor<?x8xf32>, tensor<?x8xf32>
}

// Mismatched result element types (a bf16 projection and f32 logits).
// CHECK-LABEL: func.func @mismatched_result_types
// CHECK-NOT: tx.concat
// CHECK-COUNT-2: tx.linear
func.func @mismatched_result_types(%x: tensor<?x64xbf16>) -> (tensor<?x8xbf16>, tensor<?x8xf32>) {
  %w1 = tx.weight "w1" : tensor<8x64xbf16>
  %w2 = tx.weight "w2" : tensor<8x64xbf16>
  %a = tx.linear %x, %w1 : (tensor<?x64xbf16>, tensor<8x64xbf16>) -> tensor<?x8xbf16>
  %b = tx.linear %x, %w2 : (tensor<?x64xbf16>, tensor<8x64xbf16>) -> tensor<?x8xf32>
  return %a, %b : tensor<?x8xbf16>, tensor<?x8xf32>
}

// A lone linear stays as it is.
// CHECK-LABEL: func.func @single
// CHECK-NOT: tx.split
func.func @single(%x: tensor<?x64xf32>) -> tensor<?x8xf32> {
  %w = tx.weight "w" : tensor<8x64xf32>
  %a = tx.linear %x, %w : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
  return %a : tensor<?x8xf32>
}
