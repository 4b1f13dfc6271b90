#!/usr/bin/env python3
"""Make the tiny random-weight test checkpoints under test/fixtures/.

One fixture per supported architecture family, each small enough to commit
(well under 1 MB) and each built to expose a different frontend or kernel
feature:

  tiny-llama    GQA 4/2, head_dim 32 != hidden/heads (16), llama3 rope scaling,
                untied lm_head
  tiny-mistral  GQA 4/1 (MQA), sliding window 6 on every layer, rope theta 1e6
  tiny-qwen2    q/k/v bias, tied embeddings, linear rope scaling, sliding
                window 5 on layers >= max_window_layers (layer_types)
  tiny-qwen3    q/k RMSNorm, head_dim 32, yarn rope scaling, tied embeddings

Weights are random but not the transformers defaults: norm weights are drawn
from [0.6, 1.4] so a missing or misplaced norm changes the logits, and biases
are non-zero. They are saved in bf16 with `save_pretrained`.

Goldens (golden.json, the same layout as ../shared/models/stories260K):
the checkpoint is reloaded from disk in fp32 (so the bf16 values are upcast
exactly) with eager attention, and a plain greedy loop runs full forwards
without a KV cache; per step it records the logits of the last position and
the argmax. `model.generate` (with its KV cache) must produce the same tokens;
the script fails otherwise. Prompts have lengths 1, 7 and 19, so the longest
runs past every sliding window.

Run where torch and transformers are installed (the GPU machine has torch 2.11
and transformers 5.17); the forwards run on the CPU in fp32, which avoids TF32.

  python3 python/tools/make_fixtures.py --out DIR [--only tiny-llama ...]
"""

import argparse
import json
import math
import os
import struct
import sys
import zlib

import torch
import transformers
from transformers import (AutoModelForCausalLM, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)

VOCAB = 256
PROMPT_LENGTHS = (1, 7, 19)
NEW_TOKENS = 8
BOS, EOS = 1, 2


def fixture_configs():
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                  num_attention_heads=4, max_position_embeddings=128,
                  bos_token_id=BOS, eos_token_id=EOS)
    return {
        "tiny-llama": LlamaConfig(
            **common, num_hidden_layers=2, num_key_value_heads=2, head_dim=32,
            rms_norm_eps=1e-5, tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                             "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 32}),
        "tiny-mistral": MistralConfig(
            **common, num_hidden_layers=2, num_key_value_heads=1,
            rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "tiny-qwen2": Qwen2Config(
            **common, num_hidden_layers=3, num_key_value_heads=2,
            rms_norm_eps=1e-6, tie_word_embeddings=True,
            use_sliding_window=True, sliding_window=5, max_window_layers=2,
            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                             "factor": 2.0}),
        "tiny-qwen3": Qwen3Config(
            **common, num_hidden_layers=2, num_key_value_heads=2, head_dim=32,
            rms_norm_eps=1e-6, tie_word_embeddings=True,
            rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0,
                             "factor": 4.0,
                             "original_max_position_embeddings": 32}),
    }


@torch.no_grad()
def randomize(model, generator):
    """Scales chosen so logits spread over a few units: clear greedy margins.

    The embeddings are small and the layer outputs (o_proj, down_proj) large:
    with tied embeddings a residual stream dominated by the input token's own
    embedding makes every greedy step repeat the last token, which no test
    could tell from a model that skipped its layers.
    """
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):  # input/post-attention/final/q/k norms
            param.copy_(torch.rand(param.shape, generator=generator) * 0.8 + 0.6)
        elif name.endswith(".bias"):
            param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
        elif "embed_tokens" in name:
            param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
        elif param.dim() == 2:
            fan_in = param.shape[1]
            gain = {"lm_head": 2.0, "o_proj": 3.0, "down_proj": 3.0}.get(name.split(".")[-2], 1.0)
            param.copy_(torch.randn(param.shape, generator=generator) * gain / math.sqrt(fan_in))
        else:
            raise RuntimeError(f"no init rule for {name} {tuple(param.shape)}")


def make_prompts(generator):
    prompts = []
    for length in PROMPT_LENGTHS:
        # Ids 3.. avoid bos/eos inside the prompt; every prompt starts with bos.
        body = torch.randint(3, VOCAB, (length - 1,), generator=generator).tolist()
        prompts.append([BOS] + body)
    return prompts


def compact_float(value):
    # 9 significant digits round-trip fp32 exactly and keep the JSON small.
    return float(f"{value:.9g}")


@torch.no_grad()
def greedy_goldens(model, prompt):
    ids = list(prompt)
    output_ids, step_logits, margins = [], [], []
    for _ in range(NEW_TOKENS):
        logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1].float()
        top2 = torch.topk(logits, 2)
        next_id = int(top2.indices[0])
        output_ids.append(next_id)
        step_logits.append([compact_float(v) for v in logits.tolist()])
        margins.append(compact_float(float(top2.values[0] - top2.values[1])))
        ids.append(next_id)
    return output_ids, step_logits, margins


@torch.no_grad()
def generate_with_cache(model, prompt):
    out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS,
                         min_new_tokens=NEW_TOKENS, do_sample=False,
                         pad_token_id=0)
    return out[0, len(prompt):].tolist()


def check_saved_dtypes(fixture_dir):
    with open(os.path.join(fixture_dir, "model.safetensors"), "rb") as f:
        (header_length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_length))
    dtypes = {entry["dtype"] for key, entry in header.items() if key != "__metadata__"}
    if dtypes != {"BF16"}:
        raise RuntimeError(f"{fixture_dir}: saved dtypes {dtypes}, expected only BF16")


def make_fixture(name, config, out_dir, seed):
    fixture_dir = os.path.join(out_dir, name)
    os.makedirs(fixture_dir, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)

    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    randomize(model, generator)
    model.to(torch.bfloat16).save_pretrained(fixture_dir)
    check_saved_dtypes(fixture_dir)

    reloaded = AutoModelForCausalLM.from_pretrained(
        fixture_dir, dtype=torch.float32, attn_implementation="eager").eval()
    cases = []
    for prompt in make_prompts(generator):
        output_ids, step_logits, margins = greedy_goldens(reloaded, prompt)
        cached_ids = generate_with_cache(reloaded, prompt)
        if cached_ids != output_ids:
            # min_new_tokens masks eos, so a golden that chose eos can differ
            # legitimately; anything else means the two HF paths disagree.
            if EOS not in output_ids:
                raise RuntimeError(f"{name}: generate {cached_ids} != greedy {output_ids}")
        cases.append({"prompt_ids": prompt, "output_ids": output_ids,
                      "step_logits": step_logits, "top1_margin": margins})

    # Random models loop now and then, but a model whose every step repeats
    # its input token is one a test could not tell from one without layers.
    steps = [(([c["prompt_ids"][-1]] + c["output_ids"])[i], c["output_ids"][i])
             for c in cases for i in range(NEW_TOKENS)]
    repeats = sum(previous == chosen for previous, chosen in steps)
    if repeats * 2 > len(steps):
        raise RuntimeError(f"{name}: {repeats} of {len(steps)} steps repeat the previous token: "
                           + str([c["output_ids"] for c in cases]))

    golden = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "compute": "fp32 on CPU from the saved bf16 weights, eager attention, "
                   "greedy without KV cache; step_logits[i] are the logits that "
                   "chose output_ids[i]",
        "cases": cases,
    }
    with open(os.path.join(fixture_dir, "golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")

    total = sum(os.path.getsize(os.path.join(fixture_dir, f)) for f in os.listdir(fixture_dir))
    print(f"{name}: {total} bytes, outputs "
          + " | ".join(" ".join(map(str, c["output_ids"])) for c in cases)
          + f", min margin {min(min(c['top1_margin']) for c in cases):.4f}")
    if total >= 1 << 20:
        raise RuntimeError(f"{name} is {total} bytes; fixtures must stay under 1 MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder that receives one subfolder per fixture")
    parser.add_argument("--only", nargs="*", help="fixture names to make (default: all)")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()

    torch.use_deterministic_algorithms(True)
    configs = fixture_configs()
    names = args.only or list(configs)
    failures = 0
    for name in names:
        try:
            # Seeded by name, so --only remakes a fixture bit for bit.
            make_fixture(name, configs[name], args.out, args.seed + zlib.crc32(name.encode()))
        except Exception as error:  # keep going: one run makes every fixture it can
            failures += 1
            print(f"{name}: FAILED: {type(error).__name__}: {error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
