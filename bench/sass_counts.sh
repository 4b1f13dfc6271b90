#!/usr/bin/env bash
# SASS counts of one prefill kernel in a compiled object (cuobjdump and nvdisasm:
# the GPU machine's, or here PyPI's nvidia-cuda-cuobjdump and -nvdisasm wheels,
# with CUOBJDUMP and PATH pointed at them): instructions, R2UR (a wgmma
# descriptor moved out of a general register: ptxas lost the step loop's
# uniform registers, device run 156) and HGMMA. Default: the d128 full-mask
# default kernel, PrefillSm90Traits<bf16,128,0,2,0,1,0> x AttentionVariant<0,0,0>.
#   bench/sass_counts.sh OBJECT[.gz] [TRAITS_MANGLED [VARIANT_MANGLED]]
set -eu
obj=$1
traits=${2:-PrefillSm90TraitsI13__nv_bfloat16Li128ELi0ELi2ELi0ELb1ELb0E}
variant=${3:-AttentionVariantILb0ELb0ELb0E}
tmp=$(mktemp -d)
case "$obj" in *.gz) gunzip -c "$obj" > "$tmp/k.o" ;; *) cp "$obj" "$tmp/k.o" ;; esac
"${CUOBJDUMP:-/usr/local/cuda/bin/cuobjdump}" -sass "$tmp/k.o" > "$tmp/k.sass"
python3 - "$tmp/k.sass" "$traits" "$variant" "$obj" <<'PY'
import re, sys
sass, traits, variant, obj = sys.argv[1:]
for fn in re.split(r'\n\s*Function : ', open(sass).read())[1:]:
    name = fn.split('\n', 1)[0]
    if traits in name and variant in name:
        lines = fn.split('\n')
        count = lambda s: sum(s in l for l in lines)
        instructions = sum(1 for l in lines if re.search(r'/\*[0-9a-f]{4}\*/', l))
        print(f"{obj}: instructions {instructions} R2UR {count('R2UR')} HGMMA {count('HGMMA')}")
PY
rm -rf "$tmp"
