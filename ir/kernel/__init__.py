"""Kernel IR: a tile-level program per fusion group, lowered from graph IR, with its own interpreter."""

from .ir import Buf, Const, Expr, IOp, Kernel, KernelProgram, LibraryCall, Load, Op, Reduce, Var

__all__ = ["Buf", "Const", "Expr", "IOp", "Kernel", "KernelProgram", "LibraryCall", "Load", "Op", "Reduce", "Var"]
