#!/usr/bin/env python3
"""Writes the hand-made broken model directories that malformed-inputs.test imports.

Each case is a folder holding a config.json and safetensors that are valid but
for one defect, so each malformed-input class shows its own message. The base
is a 1-layer Llama (hidden 8, 2 heads, 1 KV head, head_dim 4, vocab 16) in
BF16 with zero weights: a few kilobytes per case.

    python3 test/Frontend/Inputs/make_broken_inputs.py   # rewrites the folders beside it
"""

import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
}

LAYER = "model.layers.0."
TENSORS = [  # (name, shape), in file order
    ("model.embed_tokens.weight", [16, 8]),
    (LAYER + "input_layernorm.weight", [8]),
    (LAYER + "self_attn.q_proj.weight", [8, 8]),
    (LAYER + "self_attn.k_proj.weight", [4, 8]),
    (LAYER + "self_attn.v_proj.weight", [4, 8]),
    (LAYER + "self_attn.o_proj.weight", [8, 8]),
    (LAYER + "post_attention_layernorm.weight", [8]),
    (LAYER + "mlp.gate_proj.weight", [16, 8]),
    (LAYER + "mlp.up_proj.weight", [16, 8]),
    (LAYER + "mlp.down_proj.weight", [8, 16]),
    ("model.norm.weight", [8]),
    ("lm_head.weight", [16, 8]),
]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def header_for(tensors, dtype="BF16"):
    header, offset = {}, 0
    for name, shape in tensors:
        size = numel(shape) * 2
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return header, offset


def safetensors(header, data_bytes, declared_length=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    length = len(text) if declared_length is None else declared_length
    return struct.pack("<Q", length) + text + b"\0" * data_bytes


def valid_file(tensors=TENSORS):
    header, size = header_for(tensors)
    return safetensors(header, size)


def write_case(name, files):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    files.setdefault("config.json", json.dumps(CONFIG, indent=1).encode())
    for filename, content in files.items():
        with open(os.path.join(folder, filename), "wb") as f:
            f.write(content)


def main():
    good = valid_file()
    header, size = header_for(TENSORS)

    # The file ends before the header does.
    write_case("header-length-past-end", {"model.safetensors": good[:8] + good[8:40]})
    # A length prefix no header needs.
    write_case("header-length-huge", {"model.safetensors": struct.pack("<Q", 1 << 40) + good[8:]})
    write_case("header-not-json", {"model.safetensors": safetensors_raw(b'{"model.embed_tokens.weight": {"dtype": ')})
    bad = json.loads(json.dumps(header))
    bad[LAYER + "self_attn.q_proj.weight"]["dtype"] = "BF17"
    write_case("dtype-unknown", {"model.safetensors": safetensors(bad, size)})
    bad = json.loads(json.dumps(header))
    bad["model.norm.weight"]["dtype"] = "I16"  # same byte size, so only the name is wrong
    write_case("dtype-unsupported", {"model.safetensors": safetensors(bad, size)})
    # The last tensor's bytes are cut off.
    write_case("data-truncated", {"model.safetensors": good[:-10]})
    bad = json.loads(json.dumps(header))
    begin, end = bad[LAYER + "self_attn.k_proj.weight"]["data_offsets"]
    bad[LAYER + "self_attn.v_proj.weight"]["data_offsets"] = [begin + 8, end + 8]
    write_case("offsets-overlap", {"model.safetensors": safetensors(bad, size)})
    bad = json.loads(json.dumps(header))
    bad[LAYER + "mlp.up_proj.weight"]["shape"] = [16, 9]
    write_case("size-mismatch", {"model.safetensors": safetensors(bad, size)})
    # Trailing bytes no tensor claims.
    write_case("data-trailing-bytes", {"model.safetensors": good + b"\0" * 6})

    # Valid files that disagree with config.json.
    without_v = [t for t in TENSORS if t[0] != LAYER + "self_attn.v_proj.weight"]
    write_case("tensor-missing", {"model.safetensors": valid_file(without_v)})
    wrong_kv = [(n, [8, 8] if n.endswith(("k_proj.weight", "v_proj.weight")) else s)
                for n, s in TENSORS]
    write_case("tensor-wrong-shape", {"model.safetensors": valid_file(wrong_kv)})
    write_case("tensor-unknown", {"model.safetensors": valid_file(
        TENSORS + [(LAYER + "self_attn.q_proj.bias", [8])])})

    # config.json problems.
    unsupported = dict(CONFIG, architectures=["GPT2LMHeadModel"], model_type="gpt2")
    write_case("config-unsupported-architecture", {
        "config.json": json.dumps(unsupported).encode(), "model.safetensors": good})
    write_case("config-not-json", {"config.json": b'{"hidden_size": 8,,}', "model.safetensors": good})
    gqa = dict(CONFIG, num_key_value_heads=3)
    write_case("config-heads-not-divisible", {
        "config.json": json.dumps(gqa).encode(), "model.safetensors": good})

    # Sharded sets.
    first, second = TENSORS[:6], TENSORS[6:]
    index = {"metadata": {"total_size": 0}, "weight_map": {}}
    for name, _ in first:
        index["weight_map"][name] = "model-00001-of-00002.safetensors"
    for name, _ in second:
        index["weight_map"][name] = "model-00002-of-00002.safetensors"
    write_case("shard-missing", {
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": valid_file(first)})
    misplaced = json.loads(json.dumps(index))
    misplaced["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"
    write_case("shard-wrong-place", {
        "model.safetensors.index.json": json.dumps(misplaced).encode(),
        "model-00001-of-00002.safetensors": valid_file(first),
        "model-00002-of-00002.safetensors": valid_file(second)})
    write_case("no-weights", {})


def safetensors_raw(header_text):
    return struct.pack("<Q", len(header_text)) + header_text


if __name__ == "__main__":
    main()
