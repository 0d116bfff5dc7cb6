#!/usr/bin/env bash
# Builds what `akg tune --ray` needs on the GPU machine, which has no Ray and cannot fetch it: Ray's wheel
# (about 79 MB, over a device call's 64 MiB) unpacked without what akg never imports (Java jars, RLlib,
# Serve, Data, Train, Tune, AIR, the dashboard's web build), its shared library stripped, as
# .carry/ray-py312.tar.xz (about 27 MB); Ray's dependencies as wheels in .whl/. Both folders must be
# git-ignored. Run from the project root; on the GPU machine (carry .carry and .whl) start with:
#   mkdir -p /tmp/site && tar -xJf .carry/ray-py312.tar.xz -C /tmp/site && chmod +x \
#     /tmp/site/ray/core/src/ray/raylet/raylet /tmp/site/ray/core/src/ray/gcs/gcs_server && \
#   python3 -m pip install -q --no-index --find-links .whl lark click jsonschema msgpack aiohappyeyeballs \
#     aiosignal attrs frozenlist 'multidict<7' propcache yarl idna && export PYTHONPATH=/tmp/site:$PWD
# (pip installs only what the image lacks), then benchmarks/gpu/ray_gpus.sh.
set -euo pipefail
ver=$(sed -n 's/^ray==//p' requirements.lock)
out=.carry/ray-py312.tar.xz
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_5_x86_64
      --platform manylinux1_x86_64)
mkdir -p .carry .whl
python3 -m pip download -q --no-deps "${plat[@]}" -d .whl lark click jsonschema jsonschema-specifications \
    referencing rpds-py attrs msgpack aiohappyeyeballs aiosignal frozenlist 'multidict<7' propcache yarl idna \
    typing_extensions
[ -f "$out" ] && { echo "$out already there"; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps "${plat[@]}" -d "$work" "ray==$ver"
mkdir -p "$work/site"
python3 -m zipfile -e "$work"/ray-*.whl "$work/site"
rm -rf "$work"/site/*.data "$work"/site/ray/{jars,rllib,serve,data,llm,train,tune,air} \
    "$work/site/ray/dashboard/client/build"
strip --strip-unneeded "$work/site/ray/_raylet.so"
tar -cJf "$out" -C "$work/site" .
ls -la "$out"
