"""akg graph IR: typed ops, SSA graphs, text form, reference interpreter, lifting and passes."""

from . import (
    decompose,  # noqa: F401 - registers each composite's meaning with the interpreter
    recurrence,  # noqa: F401 - the recurrent layers' composite (its meaning, like the others)
)
from .evaluate import run
from .graph import Graph, Node, print_graph
from .interp import EvalCtx
from .kernel import flash, rows  # noqa: F401 - register the row and attention fusion passes (they lower to check)
from .text import parse_graph
from .types import TensorType

__all__ = ["Graph", "Node", "TensorType", "EvalCtx", "run", "parse_graph", "print_graph"]
