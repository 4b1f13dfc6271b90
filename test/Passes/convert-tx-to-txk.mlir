// RUN: tx-opt %s -split-input-file -convert-tx-to-txk=target=cpu | FileCheck %s --check-prefix=CPU
// RUN: tx-opt %s -split-input-file -convert-tx-to-txk=target=sm_90a | FileCheck %s --check-prefix=SM90

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, page = 16, bf16>

// The fused forms of one decoder layer: the QKV projection carries the
// rope/append epilogue, the residual adds ride on the o_proj and down GEMMs,
// SwiGLU on the gate/up GEMM.
// CPU-LABEL: func.func @layer
// CPU: %[[X:.+]] = txk.rms_norm
// CPU: %[[Q:.+]] = txk.gemm_rope_append %[[X]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {algo = "cpu"
// CPU: %[[A:.+]] = txk.attention %[[Q]], {{.*}}family = #txk<family reference>
// CPU: %[[H:.+]] = txk.gemm %[[A]], %{{.+}} residual %{{.+}} {algo = "cpu", epilogue = #txk<epilogue residual_add>}
// CPU: %[[Y:.+]] = txk.rms_norm %[[H]]
// CPU: %[[M:.+]] = txk.gemm %[[Y]], %{{.+}} {algo = "cpu", epilogue = #txk<epilogue swiglu>} : (tensor<?x64xbf16>, tensor<256x64xbf16>) -> tensor<?x128xbf16>
// CPU: txk.gemm %[[M]], %{{.+}} residual %[[H]] {algo = "cpu", epilogue = #txk<epilogue residual_add>}
// CPU-NOT: tx.linear
// SM90-LABEL: func.func @layer
// SM90: txk.gemm_rope_append {{.*}}algo = "cublaslt"
// SM90: txk.attention {{.*}}family = #txk<family sm90_prefill>{{.*}}tile_kv = 128 : i64, tile_q = 128 : i64
// SM90: txk.gemm {{.*}}algo = "cublaslt", epilogue = #txk<epilogue residual_add>
// SM90: txk.gemm {{.*}}algo = "sm90_fused", epilogue = #txk<epilogue swiglu>
func.func @layer(%h: tensor<?x64xbf16>, %pos: tensor<?xi32>, %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  %ln = tx.weight "ln" : tensor<64xbf16>
  %x = tx.rms_norm %h, %ln {eps = 1.0e-5 : f64} : tensor<?x64xbf16>, tensor<64xbf16>
  %wqkv = tx.weight "qkv" : tensor<128x64xbf16>
  %qkv = tx.linear %x, %wqkv : (tensor<?x64xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16>
  %q, %k, %v = tx.split %qkv {dim = 1 : i64} : (tensor<?x128xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>)
  %qr = tx.rope_append %q, %k, %v, %pos, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, tensor<?xi32>, !cache, !tx.batch) -> tensor<?x64xbf16>
  %a = tx.paged_attention %qr, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  %wo = tx.weight "o" : tensor<64x64xbf16>
  %o = tx.linear %a, %wo : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16>
  %ln2 = tx.weight "ln2" : tensor<64xbf16>
  %h1, %y = tx.add_rms_norm %h, %o, %ln2 {eps = 1.0e-5 : f64}
      : (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>)
  %wgu = tx.weight "gate_up" : tensor<256x64xbf16>
  %gu = tx.linear %y, %wgu : (tensor<?x64xbf16>, tensor<256x64xbf16>) -> tensor<?x256xbf16>
  %g, %u = tx.split %gu {dim = 1 : i64} : (tensor<?x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x128xbf16>)
  %m = tx.swiglu %g, %u : tensor<?x128xbf16>
  %wd = tx.weight "down" : tensor<64x128xbf16>
  %d = tx.linear %m, %wd : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
  %h2 = tx.add %h1, %d : tensor<?x64xbf16>
  return %h2 : tensor<?x64xbf16>
}

// -----

// A sum whose linear has another user cannot fold into the GEMM: the fused
// add_rms_norm kernel runs instead.
// CPU-LABEL: func.func @shared_linear
// CPU: %[[P:.+]] = txk.gemm %{{.+}}, %{{.+}} {algo = "cpu", epilogue = #txk<epilogue none>}
// CPU: txk.add_rms_norm %{{.+}}, %[[P]], %{{.+}}
func.func @shared_linear(%h: tensor<?x64xf32>, %x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = tx.weight "w" : tensor<64x64xf32>
  %ln = tx.weight "ln" : tensor<64xf32>
  %p = tx.linear %x, %w : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %s, %y = tx.add_rms_norm %h, %p, %ln {eps = 1.0e-5 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
  return %s, %y, %p : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}

// Head dim 256 takes 64-wide KV tiles on sm_90a.
// SM90-LABEL: func.func @head_dim_256
// SM90: txk.attention {{.*}}tile_kv = 64 : i64, tile_q = 128 : i64
func.func @head_dim_256(%q: tensor<?x512xbf16>, %cache: !tx.kv_cache<layers = 1, kv_heads = 1, head_dim = 256, page = 16, bf16>,
                        %batch: !tx.batch) -> tensor<?x512xbf16> {
  %a = tx.paged_attention %q, %cache, %batch
      {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64, causal}
      : (tensor<?x512xbf16>, !tx.kv_cache<layers = 1, kv_heads = 1, head_dim = 256, page = 16, bf16>, !tx.batch) -> tensor<?x512xbf16>
  return %a : tensor<?x512xbf16>
}

// Row-parallel projections add the residual on rank 0 and then reduce.
// CPU-LABEL: func.func @row_parallel
// CPU: %[[P:.+]] = txk.gemm {{.*}}epilogue = #txk<epilogue residual_add>, residual_on_first_rank}
// CPU: txk.all_reduce %[[P]] {group_size = 2 : i64}
func.func @row_parallel(%h: tensor<?x64xf32>, %x: tensor<?x32xf32>) -> tensor<?x64xf32> {
  %w = tx.weight "o" {shard_dim = 1 : i64, shard_parts = 2 : i64} : tensor<64x32xf32>
  %p = tx.linear %x, %w : (tensor<?x32xf32>, tensor<64x32xf32>) -> tensor<?x64xf32>
  %r = tx.all_reduce %p {group_size = 2 : i64} : tensor<?x64xf32>
  %s = tx.add %h, %r : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}
