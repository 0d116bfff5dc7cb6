"""akg graph IR: typed ops, SSA graphs, text form, reference interpreter, lifting and passes."""

from .evaluate import run
from .graph import Graph, Node, print_graph
from .interp import EvalCtx
from .text import parse_graph
from .types import TensorType

__all__ = ["Graph", "Node", "TensorType", "EvalCtx", "run", "parse_graph", "print_graph"]
