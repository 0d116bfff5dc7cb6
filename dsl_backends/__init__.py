"""DSL backends: one folder per DSL, each with a small manifest. The core finds them here and
through the `akg.backends` entry point, and never branches on a DSL name."""

from .base import Backend, Manifest, UnsupportedKernel, available, get_backend

__all__ = ["Backend", "Manifest", "UnsupportedKernel", "available", "get_backend"]
