"""A pytest plugin for a host of several GPUs: xdist workers alternate between them (every GPU test uses
cuda:0 of the process). Loaded before any worker initialises CUDA:

    AKG_TEST_GPUS=2 PYTHONPATH=benchmarks/gpu:$PYTHONPATH python -m pytest -p pytest_gpu_split -m gpu -n 28 tests
"""
import os

_w = os.environ.get("PYTEST_XDIST_WORKER", "")
_n = int(os.environ.get("AKG_TEST_GPUS", "1"))
if _w.startswith("gw") and _n > 1:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(int(_w[2:]) % _n)
