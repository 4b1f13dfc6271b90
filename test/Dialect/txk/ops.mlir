// RUN: tx-opt %s | tx-opt | FileCheck %s
// RUN: tx-opt %s --mlir-print-op-generic | tx-opt | FileCheck %s

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 8, page = 16, f32>

// CHECK-LABEL: func.func @every_op
func.func @every_op(%tokens: tensor<?xi32>, %pos: tensor<?xi32>, %batch: !tx.batch, %cache: !cache,
                    %table: tensor<512x64xf32>, %w: tensor<64xf32>, %wqkv: tensor<64x64xf32>,
                    %bqkv: tensor<64xf32>, %qn: tensor<8xf32>, %wo: tensor<64x32xf32>,
                    %wgu: tensor<128x64xf32>, %wd: tensor<64x64xf32>) -> tensor<?x64xf32> {
  // CHECK: txk.embedding %{{.+}}, %{{.+}} :
  %h = txk.embedding %tokens, %table {vocab_start = 0 : i64} : (tensor<?xi32>, tensor<512x64xf32>) -> tensor<?x64xf32>
  // CHECK: txk.rms_norm
  %x = txk.rms_norm %h, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // CHECK: txk.gemm_rope_append %{{.+}}, %{{.+}} bias %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} q_norm %{{.+}} k_norm %{{.+}} {algo = "cpu"
  %q = txk.gemm_rope_append %x, %wqkv bias %bqkv, %pos, %cache, %batch q_norm %qn k_norm %qn
      {algo = "cpu", layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64,
       rope = #tx.rope<theta = 1.0e4>, norm_eps = 1.0e-6 : f64}
      : (tensor<?x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<?xi32>, !cache, !tx.batch, tensor<8xf32>, tensor<8xf32>) -> tensor<?x32xf32>
  // CHECK: txk.rope_append
  %qkv = txk.gemm %x, %wqkv {algo = "cpu", epilogue = #txk<epilogue none>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %q2 = txk.rope_append %qkv, %pos, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>}
      : (tensor<?x64xf32>, tensor<?xi32>, !cache, !tx.batch) -> tensor<?x32xf32>
  // CHECK: txk.attention {{.*}}family = #txk<family paged_decode>{{.*}}split_kv = 4 : i64
  %a = txk.attention %q, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35 : f64,
       causal, family = #txk<family paged_decode>, split_kv = 4 : i64}
      : (tensor<?x32xf32>, !cache, !tx.batch) -> tensor<?x32xf32>
  // CHECK: txk.gemm %{{.+}}, %{{.+}} residual %{{.+}} {algo = "cpu", epilogue = #txk<epilogue residual_add>, residual_on_first_rank}
  %h1 = txk.gemm %a, %wo residual %h {algo = "cpu", epilogue = #txk<epilogue residual_add>, residual_on_first_rank}
      : (tensor<?x32xf32>, tensor<64x32xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: txk.all_reduce
  %r = txk.all_reduce %h1 {group_size = 2 : i64} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: txk.add_rms_norm
  %s, %y = txk.add_rms_norm %r, %h, %w {eps = 1.0e-5 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  // CHECK: txk.gemm {{.*}}epilogue = #txk<epilogue swiglu>
  %m = txk.gemm %y, %wgu {algo = "sm90_fused", epilogue = #txk<epilogue swiglu>} : (tensor<?x64xf32>, tensor<128x64xf32>) -> tensor<?x64xf32>
  %d = txk.gemm %m, %wd residual %s {algo = "cpu", epilogue = #txk<epilogue residual_add>}
      : (tensor<?x64xf32>, tensor<64x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: txk.gather_last
  %l = txk.gather_last %d, %batch : (tensor<?x64xf32>, !tx.batch) -> tensor<?x64xf32>
  return %l : tensor<?x64xf32>
}
