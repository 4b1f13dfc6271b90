#!/usr/bin/env python3
"""Times torch SDPA (flash and cuDNN backends) on the shapes attention_bench uses.

Prefill: bf16, 16k tokens per batch, H*d = 2048, causal and full; FLOPs are
4*B*H*S^2*D, halved for causal. Decode: one query token, GQA 32/8, d128,
counting the K/V bytes read; rotates over several KV copies so the working set
is past L2 (as attention_bench does). Median of many event-timed batches.
Writes JSON to the path given as argv[1].
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn, reps=25):
    for _ in range(3):
        fn(0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(0)
    end.record()
    torch.cuda.synchronize()
    per_batch = max(1, min(200, int(2.0 / max(start.elapsed_time(end), 1e-4))))
    samples, call = [], 0
    for _ in range(reps):
        start.record()
        for _ in range(per_batch):
            fn(call)
            call += 1
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / per_batch)
    return statistics.median(samples)


def prefill(results):
    # (d, seqlen, batch, name prefix, name suffix), named as attention_bench
    # names its rows: the shapes at 16k tokens a batch, then the
    # whole-round diagnostic (33 sequences of 1k: 4224 tiles of 128 rows, 32
    # on each of 132 SMs), so the 1k rows' last partial round can be told
    # apart from the per-tile rate.
    both = (True, False)
    shapes = [(d, seqlen, 16384 // seqlen, 2048 // d, "", "", both)
              for d, seqlen in [(128, 1024), (128, 4096), (128, 16384), (64, 4096), (256, 4096)]]
    shapes.append((128, 1024, 33, 16, "diag ", " b33 (whole rounds)", both))
    # attention_bench's line of 2, 4 and 8 rounds (33 heads of 8 query
    # blocks: 264 tiles a sequence, full masks only), whose intercept is a
    # launch's fixed cost.
    shapes += [(128, 1024, b, 33, "diag ", f" h33 b{b} ({2 * b} rounds)", (False,)) for b in (1, 2, 4)]
    for d, seqlen, batch, heads, prefix, suffix, masks in shapes:
        q, k, v = (torch.randn(batch, heads, seqlen, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in masks:
            flops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1)
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                key = f"{prefix}{'causal' if causal else 'full'} d{d} L{seqlen}{suffix} {name}"
                try:
                    with sdpa_kernel(backend):
                        ms = time_ms(lambda _: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    results[key] = {"ms": ms, "tflops": flops / (ms * 1e9)}
                except Exception as e:  # a backend may not support a shape
                    results[key] = {"error": repr(e)[:200]}
                print(key, results[key], flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def decode(results):
    for batch, ctx in [(64, 4096), (64, 16384), (256, 2048), (1, 32768), (1, 4096)]:
        kv_bytes = 2 * batch * ctx * 8 * 128 * 2
        copies = max(1, min(16, (400 << 20) // kv_bytes))
        q = torch.randn(batch, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        kvs = [(torch.randn(batch, 8, ctx, 128, device="cuda", dtype=torch.bfloat16),
                torch.randn(batch, 8, ctx, 128, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
        key = f"decode b{batch} L{ctx} sdpa"
        try:
            ms = time_ms(lambda i: F.scaled_dot_product_attention(q, kvs[i % copies][0], kvs[i % copies][1],
                                                                  enable_gqa=True))
            results[key] = {"ms": ms, "GBps": kv_bytes / (ms * 1e6)}
        except Exception as e:
            results[key] = {"error": repr(e)[:200]}
        print(key, results[key], flush=True)
        del kvs
        torch.cuda.empty_cache()


def main():
    results = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    prefill(results)
    decode(results)
    with open(sys.argv[1], "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
