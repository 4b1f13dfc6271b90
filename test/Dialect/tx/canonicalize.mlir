// RUN: tx-opt %s -canonicalize -split-input-file | FileCheck %s

// A one-rank all_reduce is the identity.
// CHECK-LABEL: func.func @all_reduce_single_rank
// CHECK-SAME: (%[[X:.+]]: tensor<?x8xbf16>)
// CHECK-NOT: tx.all_reduce
// CHECK: return %[[X]]
func.func @all_reduce_single_rank(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %s = tx.all_reduce %x {group_size = 1 : i64} : tensor<?x8xbf16>
  return %s : tensor<?x8xbf16>
}

// CHECK-LABEL: func.func @all_reduce_two_ranks_kept
// CHECK: tx.all_reduce %{{.+}} {group_size = 2 : i64}
func.func @all_reduce_two_ranks_kept(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %s = tx.all_reduce %x {group_size = 2 : i64} : tensor<?x8xbf16>
  return %s : tensor<?x8xbf16>
}

// -----

// CHECK-LABEL: func.func @split_of_concat
// CHECK-SAME: (%[[A:.+]]: tensor<?x4xbf16>, %[[B:.+]]: tensor<?x2xbf16>)
// CHECK-NOT: tx.split
// CHECK: return %[[B]], %[[A]]
func.func @split_of_concat(%a: tensor<?x4xbf16>, %b: tensor<?x2xbf16>) -> (tensor<?x2xbf16>, tensor<?x4xbf16>) {
  %c = tx.concat %a, %b {dim = 1 : i64} : (tensor<?x4xbf16>, tensor<?x2xbf16>) -> tensor<?x6xbf16>
  %x, %y = tx.split %c {dim = 1 : i64} : (tensor<?x6xbf16>) -> (tensor<?x4xbf16>, tensor<?x2xbf16>)
  return %y, %x : tensor<?x2xbf16>, tensor<?x4xbf16>
}

// Different cut points: the split must stay.
// CHECK-LABEL: func.func @split_of_concat_other_pieces
// CHECK: tx.concat
// CHECK: tx.split
func.func @split_of_concat_other_pieces(%a: tensor<?x4xbf16>, %b: tensor<?x2xbf16>) -> (tensor<?x3xbf16>, tensor<?x3xbf16>) {
  %c = tx.concat %a, %b {dim = 1 : i64} : (tensor<?x4xbf16>, tensor<?x2xbf16>) -> tensor<?x6xbf16>
  %x, %y = tx.split %c {dim = 1 : i64} : (tensor<?x6xbf16>) -> (tensor<?x3xbf16>, tensor<?x3xbf16>)
  return %x, %y : tensor<?x3xbf16>, tensor<?x3xbf16>
}

// Concatenated along another dimension: the split must stay.
// CHECK-LABEL: func.func @split_of_concat_other_dim
// CHECK: tx.split
func.func @split_of_concat_other_dim(%a: tensor<2x4xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xbf16>) {
  %c = tx.concat %a, %a {dim = 0 : i64} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
  %x, %y = tx.split %c {dim = 1 : i64} : (tensor<4x4xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xbf16>)
  return %x, %y : tensor<4x2xbf16>, tensor<4x2xbf16>
}

// -----

// CHECK-LABEL: func.func @concat_of_split
// CHECK-SAME: (%[[X:.+]]: tensor<?x6xbf16>)
// CHECK-NOT: tx.concat
// CHECK: return %[[X]]
func.func @concat_of_split(%x: tensor<?x6xbf16>) -> tensor<?x6xbf16> {
  %a, %b = tx.split %x {dim = 1 : i64} : (tensor<?x6xbf16>) -> (tensor<?x4xbf16>, tensor<?x2xbf16>)
  %c = tx.concat %a, %b {dim = 1 : i64} : (tensor<?x4xbf16>, tensor<?x2xbf16>) -> tensor<?x6xbf16>
  return %c : tensor<?x6xbf16>
}

// Reordered pieces are a different tensor.
// CHECK-LABEL: func.func @concat_of_split_reordered
// CHECK: tx.concat
func.func @concat_of_split_reordered(%x: tensor<?x6xbf16>) -> tensor<?x6xbf16> {
  %a, %b = tx.split %x {dim = 1 : i64} : (tensor<?x6xbf16>) -> (tensor<?x3xbf16>, tensor<?x3xbf16>)
  %c = tx.concat %b, %a {dim = 1 : i64} : (tensor<?x3xbf16>, tensor<?x3xbf16>) -> tensor<?x6xbf16>
  return %c : tensor<?x6xbf16>
}

// CHECK-LABEL: func.func @single_piece
// CHECK-SAME: (%[[X:.+]]: tensor<?x6xbf16>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @single_piece(%x: tensor<?x6xbf16>) -> (tensor<?x6xbf16>, tensor<?x6xbf16>) {
  %a = tx.split %x {dim = 1 : i64} : (tensor<?x6xbf16>) -> tensor<?x6xbf16>
  %c = tx.concat %x {dim = 1 : i64} : (tensor<?x6xbf16>) -> tensor<?x6xbf16>
  return %a, %c : tensor<?x6xbf16>, tensor<?x6xbf16>
}

// -----

// Weights are pure: an unused reference vanishes.
// CHECK-LABEL: func.func @unused_weight
// CHECK: tx.weight "used"
// CHECK-NOT: tx.weight
func.func @unused_weight() -> tensor<4xbf16> {
  %a = tx.weight "used" : tensor<4xbf16>
  %unused = tx.weight "unused" : tensor<4xbf16>
  return %a : tensor<4xbf16>
}
