"""akg's version (a module of its own: the package imports modules that need it)."""

__version__ = "0.1.0"
