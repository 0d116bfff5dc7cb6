"""CUDA-C backend."""
