#!/usr/bin/env bash
# `akg tune --ray` of part of the GPU-sized real-size set on N GPUs of one host: one Ray head started for
# the run with N GPUs, every program tuned through it (schedules of the default plan, `--budget` per
# kernel), a fresh tuning database and fresh compiler caches per run, so runs on 1 and 2 GPUs do the
# same work. Wall time per program and in all goes to OUT/wall.txt, each tune's JSON report beside it;
# benchmarks/gpu/ray_compare.py reads two such folders. Ray on a machine that lacks it: ray_bundle.sh.
#   usage: benchmarks/gpu/ray_gpus.sh NGPUS OUT [BUDGET] [SECONDS]   (PROGRAMS="mlp groupnorm" narrows;
#   PACK=1 leaves OUT as one OUT.tgz without the caches: the device tool brings back only a few loose files)
set -uo pipefail
n=${1:?number of GPUs}; out=${2:?output folder}; budget=${3:-4}; limit=${4:-600}
programs=${PROGRAMS:-"gemm_layernorm_relu groupnorm softmax_wide var_mean mlp"}
py=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export AKG_CACHE_DIR="$out/akg-cache" TRITON_CACHE_DIR="$out/triton-cache"
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))
export CUDA_VISIBLE_DEVICES
$py -m ray.scripts.scripts start --head --num-gpus "$n" --include-dashboard=false --disable-usage-stats \
    > "$out/ray-start.txt" 2>&1 || { cat "$out/ray-start.txt"; exit 1; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
start=$(ms)
for p in $programs; do
    t0=$(ms)
    left=$(( limit - (t0 - start) / 1000 ))
    [ "$left" -gt 10 ] || { echo "$p not started: the run's $limit s were spent" >> "$out/wall.txt"; continue; }
    timeout "$left" $py -m akg_agent tune "benchmarks/realsize/gpu/$p.py" --target h100 --dsl triton \
        --budget "$budget" --no-strategies --ray auto --json > "$out/$p.json" 2> "$out/$p.err"
    echo "$p rc=$? $(( $(ms) - t0 )) ms" >> "$out/wall.txt"
done
echo "all $(( $(ms) - start )) ms on $n GPU(s)" >> "$out/wall.txt"
$py -m ray.scripts.scripts stop > /dev/null 2>&1
cat "$out/wall.txt"
if [ -n "${PACK:-}" ]; then
    rm -rf "$out/akg-cache" "$out/triton-cache"
    tar -czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
fi
