#!/usr/bin/env bash
# Installs what txc needs to build and test on Debian 12, and nothing that is
# already there: apt for the toolchain, pip for the Python test tools.
# Idempotent; safe to run before every build.
set -euo pipefail

APT_PKGS=(cmake ninja-build g++ make python3 python3-pip
          libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
          protobuf-compiler libprotobuf-dev nlohmann-json3-dev
          libgtest-dev clang-format)
PIP_PKGS=(lit numpy safetensors)
# `make fuzz` also needs clang and libFuzzer's runtime.
if [ "${1:-}" = "--fuzz" ]; then
  APT_PKGS+=(clang libclang-rt-dev)
fi

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "txc: installing with apt: ${missing[*]}"
  # MLIR 22 comes from Debian's bookworm-security suite.
  if ! grep -rqs "bookworm-security" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian-security bookworm-security main" |
      sudo_if_needed tee /etc/apt/sources.list.d/bookworm-security.list >/dev/null
  fi
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

pip_missing=()
for p in "${PIP_PKGS[@]}"; do
  python3 -m pip show -q "$p" >/dev/null 2>&1 || pip_missing+=("$p")
done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "txc: installing with pip: ${pip_missing[*]}"
  python3 -m pip install -q "${pip_missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${pip_missing[@]}"
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "txc: CUDA toolkit found at /usr/local/cuda"
else
  echo "txc: no CUDA toolkit at /usr/local/cuda; the CUDA parts will be skipped"
fi
