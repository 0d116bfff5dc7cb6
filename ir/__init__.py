"""akg graph IR: typed ops, SSA graphs, text form, reference interpreter, lifting and passes."""

from .graph import Graph, Node
from .interp import EvalCtx, run
from .text import parse_graph, print_graph
from .types import TensorType

__all__ = ["Graph", "Node", "TensorType", "EvalCtx", "run", "parse_graph", "print_graph"]
