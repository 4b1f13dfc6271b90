#!/usr/bin/env python3
"""Generate the golden TinyStories story from BOS and decode it with vocab.json.

  story_text.py TX_RUN ARTIFACT MODEL_DIR

Prints the decoded text; exits 1 if the tokens differ from HF's story_ids.
"""
import json
import re
import subprocess
import sys

tx_run, artifact, model_dir = sys.argv[1:4]
golden = json.load(open(f"{model_dir}/golden.json"))
vocab = json.load(open(f"{model_dir}/vocab.json"))
want = golden["story_ids"]
out = subprocess.run([tx_run, artifact, "--device", "cpu", "--prompt-ids", "1",
                      "--max-new-tokens", str(len(want)), "--ignore-eos", "--json"],
                     capture_output=True, text=True, check=True)
got = json.loads(out.stdout)["output_ids"]


def piece(token):
    text = vocab[token]
    byte = re.fullmatch(r"<0x([0-9A-F]{2})>", text)
    return chr(int(byte.group(1), 16)) if byte else text.replace("\u2581", " ")


text = "".join(piece(t) for t in got).lstrip(" ")
print(text)
if got != want:
    first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    print(f"FAIL: token {first} is {got[first]}, HF chose {want[first]}")
    sys.exit(1)
