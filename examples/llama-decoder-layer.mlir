// One Llama decoder layer of the stories260K shape (hidden 64, 8 heads,
// 4 KV heads, head_dim 8, intermediate 172) followed by the final norm and
// the lm_head, as the frontend builds it. `make run` optimises it with
// tx-opt until the compiler and runtime take over.

!cache = !tx.kv_cache<layers = 1, kv_heads = 4, head_dim = 8, page = 16, f32>

func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %batch: !tx.batch,
                %cache: !cache) -> tensor<?x512xf32> {
  %embed = tx.weight "model.embed_tokens.weight" : tensor<512x64xf32>
  %h0 = tx.embedding %tokens, %embed : (tensor<?xi32>, tensor<512x64xf32>) -> tensor<?x64xf32>

  %ln1 = tx.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
  %x = tx.rms_norm %h0, %ln1 {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  %wq = tx.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  %wk = tx.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
  %wv = tx.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
  %q = tx.linear %x, %wq : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %k = tx.linear %x, %wk : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %v = tx.linear %x, %wv : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %qr = tx.rotary %q, %positions {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>}
      : tensor<?x64xf32>, tensor<?xi32>
  %kr = tx.rotary %k, %positions {head_dim = 8 : i64, rope = #tx.rope<theta = 1.0e4>}
      : tensor<?x32xf32>, tensor<?xi32>
  %attn = tx.attention %qr, %kr, %v, %cache, %batch
      {layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64,
       scale = 0.35355339059327373 : f64, causal}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !cache, !tx.batch) -> tensor<?x64xf32>
  %wo = tx.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
  %o = tx.linear %attn, %wo : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %h1 = tx.add %h0, %o : tensor<?x64xf32>

  %ln2 = tx.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  %y = tx.rms_norm %h1, %ln2 {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  %wg = tx.weight "model.layers.0.mlp.gate_proj.weight" : tensor<172x64xf32>
  %wu = tx.weight "model.layers.0.mlp.up_proj.weight" : tensor<172x64xf32>
  %wd = tx.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x172xf32>
  %g = tx.linear %y, %wg : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %u = tx.linear %y, %wu : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %sg = tx.silu %g : tensor<?x172xf32>
  %gu = tx.mul %sg, %u : tensor<?x172xf32>
  %d = tx.linear %gu, %wd : (tensor<?x172xf32>, tensor<64x172xf32>) -> tensor<?x64xf32>
  %h2 = tx.add %h1, %d : tensor<?x64xf32>

  %last = tx.gather_last %h2, %batch : (tensor<?x64xf32>, !tx.batch) -> tensor<?x64xf32>
  %lnf = tx.weight "model.norm.weight" : tensor<64xf32>
  %n = tx.rms_norm %last, %lnf {eps = 1.0e-5 : f64} : tensor<?x64xf32>, tensor<64xf32>
  %logits = tx.linear %n, %embed : (tensor<?x64xf32>, tensor<512x64xf32>) -> tensor<?x512xf32>
  return %logits : tensor<?x512xf32>
}
