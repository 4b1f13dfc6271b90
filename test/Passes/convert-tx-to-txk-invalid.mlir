// RUN: tx-opt %s -split-input-file -convert-tx-to-txk -verify-diagnostics -o /dev/null
// RUN: not tx-opt %s -split-input-file -convert-tx-to-txk=target=sm_80 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: convert-tx-to-txk: unknown target 'sm_80' (supported: cpu, sm_90a)

!cache = !tx.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, page = 16, bf16>

func.func @unfused_attention(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>,
                             %cache: !cache, %batch: !tx.batch) -> tensor<?x64xbf16> {
  // expected-error @+1 {{convert-tx-to-txk: no cpu kernel for 'tx.attention' in this form (run tx-fuse-rotary first)}}
  %a = tx.attention %q, %k, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, causal}
      : (tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>, !cache, !tx.batch) -> tensor<?x64xbf16>
  return %a : tensor<?x64xbf16>
}

// -----

func.func @gelu(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{convert-tx-to-txk: no cpu kernel for 'tx.gelu' in this form}}
  %y = tx.gelu %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
