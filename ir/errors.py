"""User-facing errors: one line that names the cause and the fix. The CLI prints them and exits 2."""


class AkgError(Exception):
    """An error in the user's input or environment, reported as one line."""

    exit_code = 2


class UnsupportedKernel(Exception):
    """A backend (or an analysis it relies on) cannot express this kernel; the planner falls back to a
    library call, or translate reports it."""
