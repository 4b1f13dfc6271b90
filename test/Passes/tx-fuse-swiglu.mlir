// RUN: tx-opt %s -tx-fuse-swiglu -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @fuse
// CHECK-SAME: (%[[G:.+]]: tensor<?x172xf32>, %[[U:.+]]: tensor<?x172xf32>)
// CHECK-NEXT: %[[S:.+]] = tx.swiglu %[[G]], %[[U]] : tensor<?x172xf32>
// CHECK-NEXT: return %[[S]]
func.func @fuse(%g: tensor<?x172xf32>, %u: tensor<?x172xf32>) -> tensor<?x172xf32> {
  %s = tx.silu %g : tensor<?x172xf32>
  %m = tx.mul %s, %u : tensor<?x172xf32>
  return %m : tensor<?x172xf32>
}

// The silu on the right-hand side fuses too.
// CHECK-LABEL: func.func @fuse_commuted
// CHECK-SAME: (%[[G:.+]]: tensor<?x172xbf16>, %[[U:.+]]: tensor<?x172xbf16>)
// CHECK-NEXT: tx.swiglu %[[G]], %[[U]]
func.func @fuse_commuted(%g: tensor<?x172xbf16>, %u: tensor<?x172xbf16>) -> tensor<?x172xbf16> {
  %s = tx.silu %g : tensor<?x172xbf16>
  %m = tx.mul %u, %s : tensor<?x172xbf16>
  return %m : tensor<?x172xbf16>
}

// -----

// The silu result has another use: nothing fuses.
// CHECK-LABEL: func.func @silu_other_use
// CHECK: tx.silu
// CHECK: tx.mul
// CHECK-NOT: tx.swiglu
func.func @silu_other_use(%g: tensor<?x172xf32>, %u: tensor<?x172xf32>) -> (tensor<?x172xf32>, tensor<?x172xf32>) {
  %s = tx.silu %g : tensor<?x172xf32>
  %m = tx.mul %s, %u : tensor<?x172xf32>
  return %m, %s : tensor<?x172xf32>, tensor<?x172xf32>
}

// A gelu gate is not a SwiGLU.
// CHECK-LABEL: func.func @gelu_gate
// CHECK: tx.gelu
// CHECK: tx.mul
// CHECK-NOT: tx.swiglu
func.func @gelu_gate(%g: tensor<?x172xf32>, %u: tensor<?x172xf32>) -> tensor<?x172xf32> {
  %s = tx.gelu %g : tensor<?x172xf32>
  %m = tx.mul %s, %u : tensor<?x172xf32>
  return %m : tensor<?x172xf32>
}

// An add is not a product.
// CHECK-LABEL: func.func @silu_add
// CHECK: tx.add
// CHECK-NOT: tx.swiglu
func.func @silu_add(%g: tensor<?x172xf32>, %u: tensor<?x172xf32>) -> tensor<?x172xf32> {
  %s = tx.silu %g : tensor<?x172xf32>
  %m = tx.add %s, %u : tensor<?x172xf32>
  return %m : tensor<?x172xf32>
}
