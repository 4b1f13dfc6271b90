// RUN: tx-opt %s -tx-fuse-add-rms-norm -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @fuse
// CHECK-SAME: (%[[H:.+]]: tensor<?x64xf32>, %[[O:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<64xf32>)
// CHECK-NEXT: %[[SUM:.+]], %[[Y:.+]] = tx.add_rms_norm %[[H]], %[[O]], %[[W]] {eps = 1.000000e-05 : f64}
// CHECK-NEXT: return %[[SUM]], %[[Y]]
func.func @fuse(%h: tensor<?x64xf32>, %o: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %sum = tx.add %h, %o : tensor<?x64xf32>
  %y = tx.rms_norm %sum, %w {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  return %sum, %y : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// A per-head norm (Qwen3's q norm) of a sum is not a residual-stream norm.
// CHECK-LABEL: func.func @per_head_norm
// CHECK: tx.add
// CHECK: tx.rms_norm
// CHECK-NOT: tx.add_rms_norm
func.func @per_head_norm(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %w: tensor<16xf32>) -> tensor<?x64xf32> {
  %sum = tx.add %a, %b : tensor<?x64xf32>
  %y = tx.rms_norm %sum, %w {eps = 1.0e-6 : f64} : tensor<?x64xf32>, tensor<16xf32>
  return %y : tensor<?x64xf32>
}

// The sum has a user before the norm: the fused op cannot move up.
// CHECK-LABEL: func.func @sum_used_before
// CHECK: tx.add
// CHECK: tx.silu
// CHECK: tx.rms_norm
// CHECK-NOT: tx.add_rms_norm
func.func @sum_used_before(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %sum = tx.add %a, %b : tensor<?x64xf32>
  %s = tx.silu %sum : tensor<?x64xf32>
  %y = tx.rms_norm %sum, %w {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  return %s, %y : tensor<?x64xf32>, tensor<?x64xf32>
}

// A norm of something other than an add.
// CHECK-LABEL: func.func @not_an_add
// CHECK: tx.mul
// CHECK-NOT: tx.add_rms_norm
func.func @not_an_add(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %p = tx.mul %a, %b : tensor<?x64xf32>
  %y = tx.rms_norm %p, %w {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  return %y : tensor<?x64xf32>
}
