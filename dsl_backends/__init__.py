"""DSL backends: one folder per DSL, each with a small manifest. The core finds them here and
through the `akg.backends` entry point, and never branches on a DSL name."""

from .base import (
                   Backend,
                   BackendBase,
                   Manifest,
                   UnsupportedKernel,
                   available,
                   build_env,
                   default_dsl,
                   dsls_for,
                   get_backend,
                   hook,
                   import_env,
                   precompilers,
                   preload,
                   preload_for_source,
                   sandbox_env,
)

__all__ = ["Backend", "BackendBase", "Manifest", "UnsupportedKernel", "available", "build_env", "default_dsl",
           "dsls_for", "get_backend", "hook", "import_env", "precompilers", "preload", "preload_for_source",
           "sandbox_env"]
