// RUN: tx-opt %s -tx-shard=tp=2 --verify-each | FileCheck %s --check-prefix=TP2
// RUN: tx-opt %s -tx-shard=tp=4 --verify-each | FileCheck %s --check-prefix=TP4
// RUN: tx-opt %s -tx-shard=tp=1 | FileCheck %s --check-prefix=TP1

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, page = 16, bf16>

// Column-parallel Q/K/V and gate/up, row-parallel o_proj and down, each
// followed by an all_reduce; heads divided across ranks.
// TP2-LABEL: func.func @layer
// TP2-SAME: !tx.kv_cache<layers = 1, kv_heads = 1, head_dim = 16, page = 16, bf16>
// TP2: tx.weight "q" {shard_dim = 0 : i64, shard_parts = 2 : i64} : tensor<32x64xbf16>
// TP2: tx.weight "k" {shard_dim = 0 : i64, shard_parts = 2 : i64} : tensor<16x64xbf16>
// TP2: tx.rotary %{{.+}}, %{{.+}} {{.*}} : tensor<?x32xbf16>, tensor<?xi32>
// TP2: tx.attention {{.*}}num_heads = 2 : i64, num_kv_heads = 1 : i64{{.*}} -> tensor<?x32xbf16>
// TP2: tx.weight "o" {shard_dim = 1 : i64, shard_parts = 2 : i64} : tensor<64x32xbf16>
// TP2: %[[O:.+]] = tx.linear {{.*}} -> tensor<?x64xbf16>
// TP2-NEXT: %[[R:.+]] = tx.all_reduce %[[O]] {group_size = 2 : i64}
// TP2-NEXT: tx.add %{{.+}}, %[[R]]
// TP2: tx.weight "gate" {shard_dim = 0 : i64, shard_parts = 2 : i64} : tensor<64x64xbf16>
// TP2: tx.weight "down" {shard_dim = 1 : i64, shard_parts = 2 : i64} : tensor<64x64xbf16>
// TP2: tx.silu %{{.+}} : tensor<?x64xbf16>
// TP2: tx.all_reduce %{{.+}} {group_size = 2 : i64}

// One rank changes nothing but the recorded degree.
// TP1: module attributes {tx.tp = 1 : i64}
// TP1-NOT: shard_dim
// TP1-NOT: tx.all_reduce

// Four ranks, two KV heads: each KV head is replicated on two ranks.
// TP4-LABEL: func.func @layer
// TP4-SAME: kv_heads = 1
// TP4: tx.weight "q" {shard_dim = 0 : i64, shard_parts = 4 : i64} : tensor<16x64xbf16>
// TP4: tx.weight "k" {shard_dim = 0 : i64, shard_parts = 2 : i64} : tensor<16x64xbf16>
// TP4: tx.attention {{.*}}num_heads = 1 : i64, num_kv_heads = 1 : i64
func.func @layer(%x: tensor<?x64xbf16>, %pos: tensor<?xi32>, %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  %wq = tx.weight "q" : tensor<64x64xbf16>
  %wk = tx.weight "k" : tensor<32x64xbf16>
  %wv = tx.weight "v" : tensor<32x64xbf16>
  %q = tx.linear %x, %wq : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16>
  %k = tx.linear %x, %wk : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
  %v = tx.linear %x, %wv : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
  %qr = tx.rotary %q, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x64xbf16>, tensor<?xi32>
  %kr = tx.rotary %k, %pos {head_dim = 16 : i64, rope = #tx.rope<theta = 1.0e4>} : tensor<?x32xbf16>, tensor<?xi32>
  %a = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  %wo = tx.weight "o" : tensor<64x64xbf16>
  %o = tx.linear %a, %wo : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16>
  %h = tx.add %x, %o : tensor<?x64xbf16>
  %wg = tx.weight "gate" : tensor<128x64xbf16>
  %wu = tx.weight "up" : tensor<128x64xbf16>
  %wd = tx.weight "down" : tensor<64x128xbf16>
  %g = tx.linear %h, %wg : (tensor<?x64xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16>
  %u = tx.linear %h, %wu : (tensor<?x64xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16>
  %s = tx.silu %g : tensor<?x128xbf16>
  %m = tx.mul %s, %u : tensor<?x128xbf16>
  %d = tx.linear %m, %wd : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
  %y = tx.add %h, %d : tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

