"""Agents: designer, coder, conductor (and the verifier from akg_agent.verifier), over a model Protocol;
the rules engine is the offline default."""

from .loop import RunConfig, run

__all__ = ["RunConfig", "run"]
