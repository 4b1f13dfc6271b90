#!/usr/bin/env python3
"""Merges attention_bench and torch peer JSON into one results file and prints
the table of our figures against the issue-6 targets.

usage: summarize.py ours.json torch.json COMMIT OUT_DIR
"""
import datetime
import json
import os
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else {}
    commit, out_dir = sys.argv[3], sys.argv[4]
    date = datetime.date.today().isoformat()
    copy = ours.get("copy_GBps_rw") or 0
    rows = []
    # The runtime launches decode in a CUDA graph with PDL and the K/V loads
    # ahead of the wait (attention_bench's "cuda-graph+pdl+early-kv" rows);
    # where a shape has that row, its verdict is that launch's, beside the
    # plain stream launch's figure.
    by_name = {t["name"]: t for t in ours["timings"]}
    runtime_mode = " cuda-graph+pdl+early-kv"
    for t in ours["timings"]:
        if t.get("diagnostic") and t["kind"] == "prefill":
            base = t["name"].split(" [")[0]
            cudnn = peers.get(f"{base} cudnn", {}).get("tflops")
            rows.append((t["name"], f"{t['tflops']:.0f} TFLOP/s", "no torch peer" if cudnn is None else f"cudnn {cudnn:.0f}",
                         "(diagnostic)" if cudnn is None else f"(comparison, {t['tflops'] / cudnn * 100:.0f}% of cudnn)",
                         None, t["check"]))
            continue
        if t.get("diagnostic"):
            rows.append((t["name"], f"{t['ms'] * 1000:.1f} us" + (f" {t['GBps']:.0f} GB/s" if t.get("GBps") else ""),
                         "", "(measures a limit)", None, t["check"]))
            continue
        if t["kind"] == "prefill":
            cudnn = peers.get(f"{t['name']} cudnn", {}).get("tflops")
            flash = peers.get(f"{t['name']} flash", {}).get("tflops")
            # Shapes torch has no counterpart for (paged K/V) get no verdict.
            met = None if cudnn is None else t["tflops"] >= cudnn
            peer_text = "no torch peer" if cudnn is None else f"flash {flash or 0:.0f} / cudnn {cudnn:.0f}"
            target_text = "(no peer)" if cudnn is None else f">= cudnn ({t['tflops'] / cudnn * 100:.0f}%)"
            rows.append((t["name"], f"{t['tflops']:.0f} TFLOP/s", peer_text, target_text, met, t["check"]))
            t["peer_flash_tflops"], t["peer_cudnn_tflops"] = flash, cudnn
        else:
            sdpa = peers.get(f"decode {t['name']} sdpa", {}).get("GBps")
            target_pct = 50.0 if t["name"].startswith("b1 L4096") else 85.0
            ours_text = f"{t['GBps']:.0f} GB/s ({t['pct_of_copy']:.0f}% copy)"
            runtime = by_name.get(f"diag {t['name']}{runtime_mode}")
            pct = t["pct_of_copy"]
            if runtime is not None and runtime.get("GBps"):
                pct = runtime["pct_of_copy"]
                ours_text = f"{runtime['GBps']:.0f} GB/s ({pct:.0f}%; stream {t['pct_of_copy']:.0f}%)"
                t["runtime_launch_GBps"] = runtime["GBps"]
            met = pct >= target_pct
            rows.append((t["name"], ours_text, f"sdpa {sdpa or 0:.0f} GB/s", f">= {target_pct:.0f}% copy", met,
                         t["check"]))
            t["peer_sdpa_GBps"], t["target_pct_of_copy"] = sdpa, target_pct
    merged = {"date": date, "gpu": ours["gpu"], "commit": commit, "copy_GBps_rw": copy,
              "torch": peers.get("torch"), "checks": ours["checks"], "timings": ours["timings"], "peers": peers}
    # The file names the GPU it ran on ("NVIDIA H100 80GB HBM3" -> h100).
    gpu_words = str(ours.get("gpu", "")).replace("NVIDIA", "").split()
    gpu_tag = gpu_words[0].split("-")[0].lower() if gpu_words else "gpu"
    path = os.path.join(out_dir, f"{date}-{gpu_tag}-attention.json")
    json.dump(merged, open(path, "w"), indent=1)
    fails = [c["name"] for c in ours["checks"] if not c["pass"]]
    print(f"\ncommit {commit}  gpu {ours['gpu']}  copy {copy:.0f} GB/s  checks {len(ours['checks'])} failed {len(fails)}")
    for f in fails:
        print("  FAILED:", f)
    print(f"{'case':34} {'ours (decode: as the runtime launches)':38} {'peers':26} {'target':18} met check")
    for r in rows:
        print(f"{r[0]:34} {r[1]:38} {r[2]:26} {r[3]:18} {'-  ' if r[4] is None else ('yes' if r[4] else 'NO '):3} {r[5]}")
    print("wrote", path)


if __name__ == "__main__":
    main()
