"""akg: PyTorch programs to fast, verified kernels (agents, CLI and tuner live here)."""

from .dynamo import compile
from .version import __version__

__all__ = ["__version__", "compile"]
