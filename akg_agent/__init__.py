"""akg: PyTorch programs to fast, verified kernels (agents, CLI and tuner live here)."""

__version__ = "0.1.0"
