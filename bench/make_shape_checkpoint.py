#!/usr/bin/env python3
"""Write a Hugging Face model directory of a real model's shape whose weights
are a hole: config.json plus a safetensors file with the real tensor names,
shapes and offsets, and a data section left sparse (no disk, no bytes read).

txc compiles it with --random-weights SEED (or --no-weights), so benchmarks
run real shapes without a checkpoint on the development machine.

  make_shape_checkpoint.py {qwen3-0.6b|llama-3-8b} OUT_DIR
"""
import json
import os
import struct
import sys

SHAPES = {
    "qwen3-0.6b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=1024,
                       intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
                       bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16"),
    # Meta-Llama-3-8B (plain rope, theta 500000, no rope scaling).
    "llama-3-8b": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=4096,
                       intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, vocab_size=128256,
                       max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                       mlp_bias=False, bos_token_id=128000, eos_token_id=128001,
                       torch_dtype="bfloat16"),
}


def tensors(c):
    h, i, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    yield "model.embed_tokens.weight", [c["vocab_size"], h]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", [h]
        yield p + "post_attention_layernorm.weight", [h]
        yield p + "self_attn.q_proj.weight", [q, h]
        yield p + "self_attn.k_proj.weight", [kv, h]
        yield p + "self_attn.v_proj.weight", [kv, h]
        yield p + "self_attn.o_proj.weight", [h, q]
        if c["model_type"] == "qwen3":
            yield p + "self_attn.q_norm.weight", [d]
            yield p + "self_attn.k_norm.weight", [d]
        yield p + "mlp.gate_proj.weight", [i, h]
        yield p + "mlp.up_proj.weight", [i, h]
        yield p + "mlp.down_proj.weight", [h, i]
    yield "model.norm.weight", [h]
    if not c["tie_word_embeddings"]:
        yield "lm_head.weight", [c["vocab_size"], h]


def main():
    name, out = sys.argv[1], sys.argv[2]
    config = SHAPES[name]
    os.makedirs(out, exist_ok=True)
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    header, offset = {}, 0
    for tensor, shape in tensors(config):
        size = 2
        for n in shape:
            size *= n
        header[tensor] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    path = os.path.join(out, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset)
    print(f"{path}: {offset / 1e9:.2f} GB of weights, sparse")


if __name__ == "__main__":
    main()
