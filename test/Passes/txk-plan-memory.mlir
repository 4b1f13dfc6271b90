// RUN: tx-opt %s -txk-plan-memory='max-batch-tokens=128 max-seqs=8' -split-input-file | FileCheck %s
// RUN: not tx-opt %s -txk-plan-memory='max-batch-tokens=4 max-seqs=8' 2>&1 | FileCheck %s --check-prefix=BOUNDS
// BOUNDS: txk-plan-memory: need 0 < max-seqs (8) <= max-batch-tokens (4)

// A chain a -> b -> c -> d: a and c never live together with their
// successors' successors, so two buffers of 128 x 64 x 4 bytes suffice.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: txk.arena_size = 65536 : i64, txk.max_batch_tokens = 128 : i64, txk.max_seqs = 8 : i64
// CHECK: txk.rms_norm {{.*}}arena_bytes = array<i64: 32768>, arena_offsets = array<i64: [[A:[0-9]+]]>
// CHECK: txk.rms_norm {{.*}}arena_offsets = array<i64: [[B:[0-9]+]]>
// CHECK: txk.rms_norm {{.*}}arena_offsets = array<i64: [[A]]>
// CHECK: txk.rms_norm {{.*}}arena_offsets = array<i64: [[B]]>
func.func @chain(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %a = txk.rms_norm %x, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %b = txk.rms_norm %a, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %c = txk.rms_norm %b, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %d = txk.rms_norm %c, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %d : tensor<?x64xf32>
}

// -----

// A value used late keeps its buffer: b reads a and x-derived c reads a too,
// so a overlaps everything in between. gather_last results hold max-seqs
// rows; all_reduce reuses its input's buffer.
// CHECK-LABEL: func.func @long_lived
// CHECK: %[[A:.+]] = txk.rms_norm {{.*}}arena_offsets = array<i64: [[OA:[0-9]+]]>
// CHECK: txk.rms_norm %[[A]]{{.*}}arena_offsets = array<i64: [[OB:[0-9]+]]>
// CHECK: txk.add_rms_norm {{.*}}arena_offsets = array<i64: [[OC:[0-9]+]], [[OD:[0-9]+]]>
// CHECK: txk.gather_last {{.*}}arena_bytes = array<i64: 2048>, arena_offsets = array<i64: [[OG:[0-9]+]]>
// CHECK: txk.all_reduce {{.*}}arena_offsets = array<i64: [[OG]]>
func.func @long_lived(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %batch: !tx.batch) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = txk.rms_norm %x, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %b = txk.rms_norm %a, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %c, %d = txk.add_rms_norm %b, %a, %w {eps = 1.0e-5 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  %g = txk.gather_last %d, %batch : (tensor<?x64xf32>, !tx.batch) -> tensor<?x64xf32>
  %r = txk.all_reduce %g {group_size = 2 : i64} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  return %c, %r : tensor<?x64xf32>, tensor<?x64xf32>
}
