#!/usr/bin/env bash
# akg tune every program of one sizing (every strategy, `budget` schedules per kernel, each measurement
# into the tuning database as it is taken), then akg bench the whole set: hybrid and pure modules against
# eager and torch.compile, interleaved per problem. Run it on an otherwise idle machine.
#   usage: benchmarks/realsize/tune_then_bench.sh SIZING DSL TARGET OUT [BUDGET]
#   e.g.:  benchmarks/realsize/tune_then_bench.sh cpu cpp cpu runs/realsize-cpu-cpp 1
# PROGRAMS="maxpool2d var_mean" narrows the set; TUNE_TIME caps each tune (seconds, akg tune --time).
set -uo pipefail
sizing=${1:?sizing: cpu or gpu}; dsl=${2:?dsl}; target=${3:?target}; out=${4:?output folder}; budget=${5:-1}
akg=${AKG:-akg}
mkdir -p "$out/tuned"
start=$(date +%s)
files=()
for n in ${PROGRAMS:-}; do files+=(benchmarks/realsize/"$sizing/$n.py"); done
[ ${#files[@]} -gt 0 ] || files=(benchmarks/realsize/"$sizing"/*.py)
for p in "${files[@]}"; do
    n=$(basename "$p" .py)
    t0=$(date +%s)
    if ! "$akg" tune "$p" --dsl "$dsl" --target "$target" --budget "$budget" ${TUNE_TIME:+--time "$TUNE_TIME"} \
            --json -o "$out/tuned/$n.py" \
            > "$out/tuned/$n.txt" 2>&1; then
        echo "$n: tune failed (see $out/tuned/$n.txt)"
    fi
    echo "$n $(( $(date +%s) - t0 )) s"
done | tee "$out/tune.txt"
echo "tune: $(( $(date +%s) - start )) s in all" | tee -a "$out/tune.txt"
"$akg" bench "${files[@]}" --dsl "$dsl" --target "$target" --baselines eager,compile --jobs 1 \
    --pure --out "$out/bench"
