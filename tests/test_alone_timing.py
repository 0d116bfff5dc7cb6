"""Tests that measure the host itself: run alone, after the parallel suite (the Makefile's second pytest run),
since the other xdist worker's load halves what one core of two can show."""

from __future__ import annotations

from hardware_models.fma_peak import fma_peak
from hardware_models.spec import load_target


def test_the_fma_peak_counts_every_cores_vector_fmas():
    """Against the detected peak (cores x nominal clock x lanes x 2 pipes x 2): within a clock's range, not a
    scalar loop's (1/16 of it at 512 bits) nor a folded one's (far above)."""
    peak = fma_peak(quick=True)
    assert peak is not None and 0.3 < peak / load_target("cpu", calibrated=False).peak("vector", "f32") < 3
