#!/usr/bin/env bash
# What a device run needs beside the working tree, built here (CPU machine) into the git-ignored .carry/:
# wheels the device image lacks (lark, transformers 4.57.1 and its small dependencies, Python 3.12), and
# with --tilelang the TileLang bundle (38 MB: with the tree it may pass the 64 MiB a run carries).
# On the device, carry [".carry"] and start the command with `source .carry/setup.sh`, e.g.
#   source .carry/setup.sh; python benchmarks/models/run.py --sizing gpu --dtype bf16 --modes eager,inductor,akg \
#     --out $OUT/bf16;  python benchmarks/models/train.py --sizing gpu --dtype bf16 --modes eager,inductor,akg,float64 \
#     --out $OUT/train
# The device copy's .git can lag the tree sent with it (a run read 8fd0e9e+dirty at a3c122a): write the
# commit the run measured into the result's meta by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .carry/whl
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -d .carry/whl lark==1.3.1 transformers==4.57.1 tokenizers==0.22.1 huggingface_hub==0.36.0 safetensors==0.8.0 \
  regex==2026.11.19 hf-xet
[ "${1:-}" = --tilelang ] && ../shared/tools/tilelang-bundle
cat > .carry/setup.sh <<'SETUP'
# device setup: the carried wheels, TileLang where carried, the project on the path
mkdir -p /tmp/site
pip install -q --no-index --no-deps --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1 || echo "wheel install failed"
[ -f .carry/tilelang-py312.tar.xz ] && tar -xJf .carry/tilelang-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PYTHONPATH
export AKG_CACHE_DIR=/tmp/akgcache
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
SETUP
du -sh .carry
