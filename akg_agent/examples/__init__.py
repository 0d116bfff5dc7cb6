"""Embedded example problems; `default.py` is what `akg ir` and `make demo` use with no FILE."""

from pathlib import Path

DEFAULT_PROBLEM = Path(__file__).with_name("default.py")
