// RUN: tx-opt %s -split-input-file -tx-shard=tp=2 -verify-diagnostics -o /dev/null
//
// Head counts that two ranks cannot split are rejected, naming the limit.

!cache = !tx.kv_cache<layers = 1, kv_heads = 3, head_dim = 16, page = 16, bf16>

func.func @heads_not_divisible(%q: tensor<?x48xbf16>, %k: tensor<?x48xbf16>, %v: tensor<?x48xbf16>,
                               %cache: !cache, %batch: !tx.batch) -> tensor<?x48xbf16> {
  // expected-error @+1 {{tx-shard: num_heads (3) of layer 0 is not divisible by tp=2}}
  %a = tx.attention %q, %k, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 3 : i64, num_kv_heads = 3 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x48xbf16>, tensor<?x48xbf16>, tensor<?x48xbf16>, !cache, !tx.batch) -> tensor<?x48xbf16>
  return %a : tensor<?x48xbf16>
}

// -----

!cache = !tx.kv_cache<layers = 1, kv_heads = 3, head_dim = 16, page = 16, bf16>

func.func @kv_heads_not_divisible(%q: tensor<?x96xbf16>, %k: tensor<?x48xbf16>, %v: tensor<?x48xbf16>,
                                  %cache: !cache, %batch: !tx.batch) -> tensor<?x96xbf16> {
  // expected-error @+1 {{tx-shard: num_kv_heads (3) of layer 0 neither divides nor is divisible by tp=2}}
  %a = tx.attention %q, %k, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 6 : i64, num_kv_heads = 3 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x96xbf16>, tensor<?x48xbf16>, tensor<?x48xbf16>, !cache, !tx.batch) -> tensor<?x96xbf16>
  return %a : tensor<?x96xbf16>
}

// -----

func.func @row_parallel_bias(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %wg = tx.weight "gate" : tensor<128x64xbf16>
  %wu = tx.weight "up" : tensor<128x64xbf16>
  %wd = tx.weight "down" : tensor<64x128xbf16>
  %bd = tx.weight "down.bias" : tensor<64xbf16>
  %g = tx.linear %x, %wg : (tensor<?x64xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16>
  %u = tx.linear %x, %wu : (tensor<?x64xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16>
  %m = tx.swiglu %g, %u : tensor<?x128xbf16>
  // expected-error @+1 {{tx-shard: a row-parallel projection with a bias would add it once per rank}}
  %d = tx.linear %m, %wd bias %bd : (tensor<?x128xbf16>, tensor<64x128xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16>
  return %d : tensor<?x64xbf16>
}
