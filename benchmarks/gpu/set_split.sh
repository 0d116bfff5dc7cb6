#!/usr/bin/env bash
# The real-size set's tunes (or benches) spread over the GPUs of one host: one tune_set.py (or akg bench)
# per GPU, each with CUDA_VISIBLE_DEVICES set to its GPU (each GPU times under its own lock) and its own
# tuning database (AKG_CACHE_DIR=OUT/gN/cache), which a later call carries back to translate from.
#   usage: benchmarks/gpu/set_split.sh tune OUT DEADLINE "DSLS:PROGRAMS" "DSLS:PROGRAMS" ...
#          benchmarks/gpu/set_split.sh bench OUT LIMIT "SOLUTIONS:PROGRAMS" ...
#   (job i runs in OUT/g<i> on GPU i mod the host's GPU count, or on GPU N if written "N=DSLS:PROGRAMS";
#   DSLS and PROGRAMS comma-separated; LIMIT:
#   seconds before each bench is cut; PARALLEL: tunes at once per job, default 6; TUNE_TIME: akg tune --time,
#   default 90; BASELINES: the bench's, default eager,compile)
# e.g. benchmarks/gpu/set_split.sh tune runs/set 380 "cuda-c,tilelang:conv1d,conv2d" "pallas:mlp,attention"
set -uo pipefail
mode=${1:?tune or bench}; out=$(realpath -m "${2:?output folder}"); limit=${3:?seconds}; shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
gpus=$(nvidia-smi -L | wc -l)
i=0
for job in "$@"; do
    gpu=$((i % gpus)); case $job in [0-9]=*) gpu=${job%%=*}; job=${job#*=};; esac
    what=${job%%:*}; programs=${job#*:}
    dir=$out/g$i; mkdir -p "$dir/cache"
    if [ "$mode" = tune ]; then
        CUDA_VISIBLE_DEVICES=$gpu AKG_CACHE_DIR=$dir/cache python3 "$root/benchmarks/realsize/tune_set.py" \
            --dsl "$what" --programs "$programs" --target h100 --out "$dir" --parallel "${PARALLEL:-6}" --deadline "$limit" \
            --time "${TUNE_TIME:-90}" > "$dir/tune.log" 2>&1 &
    else
        files=(); for p in ${programs//,/ }; do files+=("$root/benchmarks/realsize/gpu/$p.py"); done
        CUDA_VISIBLE_DEVICES=$gpu AKG_CACHE_DIR=$dir/cache timeout "$limit" python3 -m akg_agent bench \
            "${files[@]}" --target h100 --solutions "$what" --baselines "${BASELINES:-eager,compile}" --jobs 4 \
            --out "$dir/bench" > "$dir/bench.log" 2>&1 &
    fi
    i=$((i + 1))
done
wait
