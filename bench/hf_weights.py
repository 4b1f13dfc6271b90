#!/usr/bin/env python3
"""HF-made random weights of a model shape, as bench/model_bench.py makes them
for its parity and speed checks: HF's own init (normal std 0.02, norms 1)
under a fixed torch seed, in bfloat16, saved with save_pretrained. So an A/B
(bench/ab_decode.py --weights DIR) can run on the very weights a model check
measures.

  hf_weights.py {qwen3-0.6b|llama-3-8b|MODEL_DIR} OUT_DIR [--seed 0] [--device cuda]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_shape_checkpoint import SHAPES  # noqa: E402


def config_dir_for(spec, work):
    """(name, directory holding config.json) for a shape name or a model directory."""
    if spec in SHAPES:
        d = os.path.join(work, spec + "-config")
        os.makedirs(d, exist_ok=True)
        json.dump(SHAPES[spec], open(os.path.join(d, "config.json"), "w"), indent=2)
        return spec, d
    if os.path.isfile(os.path.join(spec, "config.json")):
        return os.path.basename(os.path.normpath(spec)), spec
    raise SystemExit(f"hf_weights: {spec}: not a shape name ({', '.join(SHAPES)}) "
                     "nor a directory with config.json")


def hf_model(cfg_dir, seed, dev):
    """The HF model of cfg_dir with HF's random init under torch seed `seed`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.from_pretrained(cfg_dir)
    torch.manual_seed(seed)
    with torch.device(dev):
        return cfg, AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a shape name or a directory with config.json")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0, help="torch seed (model_bench.py's default: 0)")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    t0 = time.monotonic()
    name, cfg_dir = config_dir_for(args.model, os.path.dirname(os.path.abspath(args.out_dir)))
    _, model = hf_model(cfg_dir, args.seed, args.device)
    model.save_pretrained(args.out_dir)
    print(f"hf_weights: {name} (seed {args.seed}) -> {args.out_dir} in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
