"""`torch.compile(model, backend="akg")` and `akg_agent.compile(model, dsl=..., target=...)`.

Dynamo hands a backend an FX graph of torch calls and example inputs (parameters among them). Each
graph is saved beside a KernelBench-form problem file that replays it, so it goes through the same
lift, passes, lowering, rendering and sandboxed verification as `akg translate`; ops akg cannot lower
stay torch calls inside the written module (`--allow-opaque`), and the report names them. A written
module is specialised to its input sizes (its guard checks them), so the compiled graph dispatches on
the sizes of each call: a new size translates once more, up to `max_compiles`, then that graph runs as
torch with one warning. Written modules are cached on disk by graph, sizes, target, DSL, versions and akg's source.
A graph that needs gradients goes through AOTAutograd (`dynamo_train`): its forward and backward graphs
are each written and verified like an inference graph.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import math
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from dsl_backends import default_dsl, get_backend
from hardware_models.spec import cache_dir, load_target, target_for_device
from ir.errors import AkgError

from . import cuda_graphs, dynamo_background
from .built import load_written
from .dynamo_sizes import Sizes, sizes_of
from .dynamo_train import SAVED_FROM, compile_inference, compile_training, discrete_outputs
from .tuning_db import versions
from .verifier import prestart_for
from .verifier.candidate import first_line
from .version import source_stamp

_PROBLEM = '''"""A graph captured by torch.compile (dynamo) for akg; {gm_file} holds the graph and its inputs."""
from pathlib import Path

import torch

from akg_agent.dynamo import load_graph

_SAVED = load_graph(Path(__file__).with_name("{gm_file}"))
# parameters and buffers passed as inputs: the verifier's signed-input trial keeps their values
AKG_FIXED_INPUTS = [i for i, fresh in enumerate(_SAVED["fresh"]) if not fresh]
# a graph under torch.autocast computes in bf16 (or fp16) between fp32 values: judged by that precision
AKG_COMPUTES_IN = {computes_in!r}
# a max pool's indices, a ReLU's mask: judged by the values they are taken from (`akg_discrete_values`)
AKG_DISCRETE_OUTPUTS = {discrete!r}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gm = _SAVED["gm"]

    def forward(self, {params}):
        out = self.gm({call})
        return {ret}


def akg_discrete_values({params}):
    """torch's values the outputs of AKG_DISCRETE_OUTPUTS are taken from (a pool's input, a ReLU's output)."""
    return _SAVED["probe"]({call})


def get_inputs():
    # parameters and buffers keep their values (a batch norm's variance must stay positive); the
    # user's floating-point inputs are drawn afresh for each seed
    return [torch.randn_like(v) if fresh else (v.clone() if isinstance(v, torch.Tensor) else v)
            for v, fresh in zip(_SAVED["inputs"], _SAVED["fresh"])]


def get_init_inputs():
    return []
'''


@dataclass(frozen=True)
class Options:
    """What `torch.compile(..., backend="akg", options={...})` accepts."""

    dsl: str = ""  # "" is the backend the target's manifests prefer
    target: str = ""  # "" is the hardware model of the inputs' device
    max_compiles: int = 8  # translations per graph (one per distinct input size), then torch
    training: str = "akg"  # graphs that need gradients: "akg" (forward and backward) or "fallback"
    fallback: str = "inductor"  # where training="fallback" sends them ("eager" keeps them as they are)
    cache_dir: str = ""  # "" is compiled/ in akg's cache directory ($AKG_CACHE_DIR)
    seeds: tuple[int, ...] = (0, 1)
    # inference graphs on a GPU: "auto" replays each written module as a CUDA graph where that keeps a plain
    # call's meaning (`cuda_graphs`), "off" launches its kernels from Python on every call
    cuda_graphs: str = "auto"
    # "wait": a graph's first call (and a new size's) writes and verifies its module, then runs it, as
    # inductor compiles before it runs; "eager": calls run the captured graph as torch while a background
    # process writes and verifies the module (`dynamo_background`), which takes over at the first call after
    # it is accepted (`Report.wait` waits for that)
    first_call: str = "wait"

    @staticmethod
    def of(options: dict[str, Any] | None) -> Options:
        options = dict(options or {})
        unknown = set(options) - set(Options.__dataclass_fields__)
        if unknown:
            raise AkgError(f"unknown akg backend option(s) {', '.join(sorted(unknown))}: "
                           f"choose from {', '.join(Options.__dataclass_fields__)}")
        if options.get("training", "akg") not in ("akg", "fallback"):
            raise AkgError(f"akg backend option training={options['training']!r}: choose 'akg' or 'fallback'")
        if options.get("cuda_graphs", "auto") not in ("auto", "off"):
            raise AkgError(f"akg backend option cuda_graphs={options['cuda_graphs']!r}: choose 'auto' or 'off'")
        if options.get("first_call", "wait") not in ("wait", "eager"):
            raise AkgError(f"akg backend option first_call={options['first_call']!r}: choose 'wait' or 'eager'")
        if "seeds" in options:
            options["seeds"] = tuple(options["seeds"])
        return Options(**options)


@dataclass
class GraphReport:
    """What akg did with one dynamo graph."""

    name: str
    dsl: str
    target: str
    translations: int = 0  # written and verified here
    replayed: int = 0  # input sizes replayed as a CUDA graph
    bounded: int = 0  # input sizes served by a module written for sizes up to a bound (symbolic sizes)
    cache_hits: int = 0  # served from the disk cache
    torch_sizes: int = 0  # input sizes run as torch (over max_compiles, or not translatable)
    eager_calls: int = 0  # calls run as torch while their module was written in the background
    kept_in_torch: list[str] = field(default_factory=list)  # ops left as torch calls
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        kept = f"; left in torch: {', '.join(self.kept_in_torch)}" if self.kept_in_torch else ""
        return (f"{self.name}: {self.dsl} on {self.target}: {self.translations} translated, "
                f"{self.cache_hits} from cache, {self.torch_sizes} size(s) run as torch"
                + (f", {self.bounded} served within a bound (--dynamic)" if self.bounded else "")
                + (f", {self.replayed} replayed as a CUDA graph" if self.replayed else "")
                + (f", {self.eager_calls} call(s) as torch while writing in the background" if self.eager_calls
                   else "") + kept)


@dataclass
class Report:
    graphs: list[GraphReport] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)  # graphs handed to the fallback backend, and why
    # first_call="eager": the modules being written in the background
    pending: list[Future[Any]] = field(default_factory=list, repr=False, compare=False)

    def summary(self) -> str:
        return "\n".join([g.line() for g in self.graphs] + [f"fallback: {f}" for f in self.fallbacks])

    def wait(self, timeout: float | None = None) -> bool:
        """Under first_call="eager": wait until every module started in the background is written (or failed);
        the next call of each graph then runs its module. False where `timeout` seconds passed first."""
        _, left = futures_wait(list(self.pending), timeout=timeout)
        return not left


def _meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ("t", tuple(a.shape), str(a.dtype), a.device.type)
    return ("v", type(a).__name__, a)


def _cache_root(opts: Options) -> Path:
    return Path(opts.cache_dir) if opts.cache_dir else cache_dir() / "compiled"


def _params(gm: torch.fx.GraphModule) -> list[str]:
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return [f"a{i}_{n}" if not n.isidentifier() else n for i, n in enumerate(names)]


def _passed(gm: torch.fx.GraphModule) -> dict[int, int]:
    """Outputs that are inputs returned as they are (output -> input position): a training forward's
    weights saved for its backward. They are handed back as the very tensors, as eager and inductor do: the
    written module would copy each (GPT-2's 2-layer CPU step copied 17 weights, about 20 ms of 280). None
    where nothing would be left for the module to compute."""
    nodes = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    places = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    passed = {i: places[n] for i, n in enumerate(nodes) if isinstance(n, torch.fx.Node) and n in places
              and isinstance(n.meta.get("val", n.meta.get("example_value")), torch.Tensor)}
    computed = [n for i, n in enumerate(nodes) if i not in passed and isinstance(n, torch.fx.Node)]
    return passed if computed else {}


def _outputs_at(gm: torch.fx.GraphModule, args: Sequence[Any], passed: dict[int, int]
                ) -> tuple[list[int], dict[int, Any], int]:
    """Which outputs are tensors the written module computes (not inputs passed through: `_passed`), which
    are constants at these input sizes (a size a forward graph with dynamic shapes saves for its backward; a
    backward graph's None for an input that needs no gradient), and how many there are. A variant is written
    per input size, so they hold."""
    nodes = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if all(isinstance(n, torch.fx.Node) and isinstance(n.meta.get("val", n.meta.get("example_value")), torch.Tensor)
           or n is None for n in nodes):  # the usual graph: no need to run it for the sizes
        return [i for i, n in enumerate(nodes) if n is not None and i not in passed], {}, len(nodes)
    with torch.no_grad():
        outs = gm(*args)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    kept = [i for i, o in enumerate(outs) if isinstance(o, torch.Tensor) and i not in passed]
    fixed = {i: (int(o) if isinstance(o, torch.SymInt) else o) for i, o in enumerate(outs)
             if not isinstance(o, torch.Tensor)}
    return kept, fixed, len(outs)


def _fresh(gm: torch.fx.GraphModule, args: Sequence[Any], kind: str) -> list[bool]:
    """Which inputs the verifier draws afresh for each seed. Parameters and buffers keep their values (a
    batch norm's variance must stay positive); so do a backward graph's saved activations (a layer norm's
    reciprocal deviation, a max pool's indices), where only the incoming gradients are drawn."""
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return [isinstance(a, torch.Tensor) and a.is_floating_point() and not weight
            and (kind != "backward" or p.startswith("tangents"))
            for a, p, weight in zip(args, names, cuda_graphs.static_inputs(gm, args))]


class GraphCode(torch.nn.Module):
    """A graph module saved as its Python code and the tensors it reads. Loading a pickled graph module
    traces its code again: an AOTAutograd graph's constants come back folded into new ones, named from a
    process-wide counter (`_tensor_constant9` on the third load), so a written module's state keys would
    not match the next load's; the code and its named buffers load the same every time."""

    GLOBALS = {"inf": math.inf, "nan": math.nan, "NoneType": type(None), "torch": torch, "device": torch.device}

    def __init__(self, code: str, consts: dict[str, torch.Tensor]) -> None:
        super().__init__()
        for k, v in consts.items():
            self.register_buffer(k, v)
        namespace = dict(self.GLOBALS)
        exec(builtins.compile(code, "<akg graph>", "exec"), namespace)  # the graph akg itself saved
        self._fn = namespace["forward"]

    def forward(self, *args: Any) -> Any:
        return self._fn(self, *args)


def _as_code(gm: torch.fx.GraphModule) -> dict[str, Any] | None:
    """The graph as code and constants, where its code needs only the usual globals (an ATen graph)."""
    py = gm.graph.python_code("self")
    targets = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    if set(py.globals) - {*GraphCode.GLOBALS, "fx_pytree", "pytree"} or any("." in t for t in targets):
        return None
    consts = {t: getattr(gm, t) for t in sorted(targets)}
    if not all(isinstance(v, torch.Tensor) for v in consts.values()):
        return None
    return {"code": py.src, "consts": {k: v.detach().clone() for k, v in consts.items()}}


def load_graph(path: Path) -> dict[str, Any]:
    """A graph saved by `_write_problem`, with its inputs: a training graph's rebuilt from its code."""
    saved = torch.load(path, weights_only=False)
    if "code" in saved:
        saved["gm"] = GraphCode(saved["code"], saved["consts"])
    if isinstance(saved.get("probe"), dict):
        saved["probe"] = GraphCode(saved["probe"]["code"], saved["probe"]["consts"])
    return saved


def _computes_in(gm: torch.fx.GraphModule) -> str | None:
    """The narrower float type a graph computes in beside fp32 values (an autocast region), if any."""
    seen = {v.dtype for n in gm.graph.nodes
            if isinstance(v := n.meta.get("val", n.meta.get("example_value")), torch.Tensor)}
    low = [d for d in (torch.bfloat16, torch.float16) if d in seen]
    return str(low[0]).replace("torch.", "") if low and torch.float32 in seen else None


def _write_problem(gm: torch.fx.GraphModule, args: Sequence[Any], d: Path, kind: str = "inference",
                   sizes: Sizes | None = None) -> Path:
    """The graph's problem file in `d`. With `sizes` (a graph with symbolic sizes) forward takes the tensors
    alone and reads each size off its tensor's shape, so the lift sees the sizes vary with the tensors."""
    params = _params(gm)
    passed = _passed(gm)
    kept, fixed, n_out = _outputs_at(gm, args, passed)
    saved = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    fresh = _fresh(gm, args, kind)
    call = list(params)
    if sizes is not None:
        for p, i, dim in sizes.ints:
            call[p] = f"{params[i]}.shape[{dim}]"
        params, saved, fresh = ([xs[i] for i in sizes.tensors] for xs in (params, saved, fresh))
        passed = {i: sizes.tensors.index(j) for i, j in passed.items()}  # the module takes the tensors alone
    graph = _as_code(gm) if kind != "inference" else None
    discrete, probe = discrete_outputs(gm, kept)
    probe_code = _as_code(probe) if probe is not None else None
    torch.save({**(graph or {"gm": gm}), "inputs": saved, "fresh": fresh, "kept": kept, "fixed": fixed,
                "passed": passed, "n_out": n_out, "probe": probe_code or probe}, d / "graph.pt")
    ret = "out[0]" if kept == [0] else "out" if len(kept) == n_out else f"tuple(out[i] for i in {kept})"
    src = _PROBLEM.format(gm_file="graph.pt", params=", ".join(params), call=", ".join(call), ret=ret,
                          computes_in=_computes_in(gm), discrete=discrete)
    path = d / "graph.py"
    path.write_text(src)
    return path


class CompiledGraph:
    """One dynamo graph: a verified akg module per input size (or, for symbolic sizes, per bound), torch
    beyond the limit."""

    def __init__(self, gm: torch.fx.GraphModule, opts: Options, report: GraphReport, kind: str = "inference",
                 replayable: bool = False, pending: list[Future[Any]] | None = None):
        self.gm, self.opts, self.report, self.kind = gm, opts, report, kind
        # first_call="eager": the sizes whose modules are being written in the background, and the backend's list
        self.waiting: dict[tuple[Any, ...], Future[tuple[str, list[str]]]] = {}
        self.pending = pending if pending is not None else []
        self.replayable = replayable  # a CUDA graph may replay it (`cuda_graphs`)
        self.entries: list[Path] = []  # the cache entries this graph's sizes were written to
        self.variants: dict[tuple[Any, ...], Callable[..., Any]] = {}
        # symbolic sizes (dynamic=True, or dynamo's graph after a second size): modules written for sizes up to
        # bounds, each serving every size within its bounds
        self.sizes = sizes_of(gm) if kind == "inference" else None
        self.up_to: list[tuple[tuple[int, ...], Callable[..., Any]]] = []
        self.keyed: list[int] | None = None  # the inputs whose sizes pick a variant
        self.unreplayable: str | None = None  # why a CUDA graph may not replay it ("" where it may)
        self.lock = threading.Lock()
        self.warned = False

    def __call__(self, *args: Any) -> Any:
        if self.keyed is None:  # parameters and buffers keep their sizes (dynamo guards them): not keyed per call
            self.keyed = [i for i, fixed in enumerate(cuda_graphs.static_inputs(self.gm, args)) if not fixed]
        key = tuple(_meta(args[i]) for i in self.keyed)
        fn = self.variants.get(key)
        if fn is None:
            job = self.waiting.get(key)
            if job is None or job.done():
                # writing and verifying a size draws random numbers here (the lift, the checks): the caller's
                # generators are put back after, so the call draws what eager would (a dropout's mask)
                cuda = sorted({a.device.index or 0 for a in args if isinstance(a, torch.Tensor) and a.is_cuda})
                with self.lock, torch.random.fork_rng(devices=cuda):
                    fn = self.variants.get(key) or self._variant(key, args)
                    if fn is not None:
                        self.variants[key] = fn
            if fn is None:  # its module is being written in the background: this call runs as torch
                self.report.eager_calls += 1
                return self.gm.forward(*args)
        return fn(*args)

    def _torch(self, why: str) -> Callable[..., Any]:
        self.report.torch_sizes += 1
        if not self.warned:
            self.warned = True
            warnings.warn(f"akg: graph {self.report.name} runs as torch for some input sizes: {why}", stacklevel=3)
        self.report.notes.append(why)
        return self.gm.forward

    def _variant(self, key: tuple[Any, ...], args: Sequence[Any]) -> Callable[..., Any] | None:
        """The callable for these arguments' sizes; None while its module is written in the background."""
        if self.sizes is not None:  # a module written for sizes up to bounds at least these may serve
            for bounds, served in self.up_to:
                if self.sizes.fits(bounds, args):
                    self.report.bounded += 1
                    return self._replayed(served, args)
        made = self.report.translations + self.report.cache_hits
        if made >= self.opts.max_compiles:
            return self._torch(f"more than max_compiles={self.opts.max_compiles} input sizes "
                               "(raise it with options={'max_compiles': N})")
        spec = self.sizes.spec(_params(self.gm), args) if self.sizes is not None else ""
        # the cache entry is keyed by every input's size (the weights' too: they are not in the graph's code)
        every = self.sizes.envelope(args) if self.sizes is not None else tuple(_meta(a) for a in args)
        replay = self._will_replay(args)  # the plan prices library calls by it: part of the key
        h = hashlib.sha256("\n".join([self.gm.code, spec, repr(every), self.report.dsl, self.report.target,
                                      versions(get_backend(self.report.dsl).manifest), source_stamp(),
                                      f"replay={replay}"]).encode())
        for k, v in sorted(self.gm.state_dict().items()):  # constants the graph holds: part of its meaning
            h.update(k.encode() + v.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        digest = h.hexdigest()[:24]
        cached = _cache_root(self.opts) / digest
        module = cached / "module.py"
        if module.is_file():
            if self.waiting.pop(key, None) is not None:  # written in the background
                self.report.translations += 1
            else:
                self.report.cache_hits += 1
        else:
            if self.opts.first_call == "eager" and key not in self.waiting:
                self.waiting[key] = self._start(args, cached, spec, replay)
                return None
            try:
                if key in self.waiting:  # the background process answered without a module
                    error, notes = self.waiting.pop(key).result()
                    self.report.notes.extend(notes)
                    raise AkgError(error or f"the background translator wrote no module into {cached}")
                prestart_for(self.report.target, dsl=self.report.dsl)  # a CPU target's: not started ahead
                self.report.notes.extend(self._translate(args, cached, spec, replay))
            except AkgError as e:
                if spec:  # sizes the lift cannot keep symbolic: written per size, as a static graph is
                    self.report.notes.append(f"written per input size: --dynamic {spec}: {first_line(e)}")
                    self.sizes = None
                    return self._variant(key, args)
                return self._torch(str(e))
            self.report.translations += 1
        self.entries.append(cached)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        kept = {line.split(" at ")[0] for line in (cached / "kept.txt").read_text().splitlines()}
        self.report.kept_in_torch = sorted(set(self.report.kept_in_torch) | kept)
        fn = load_written(cached, device)
        if self.sizes is not None:  # the module takes the tensors; the graph's size inputs are read off them
            fn = functools.partial(_tensors_only, fn, self.sizes.tensors)
            self.up_to.append((self.sizes.bounds(args), fn))
        return self._replayed(fn, args)

    def _will_replay(self, args: Sequence[Any]) -> bool:
        """Whether a module for these arguments is replayed as a CUDA graph (where that keeps its meaning)."""
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        if not self.replayable or device.type != "cuda" or self.opts.cuda_graphs == "off":
            return False
        if self.unreplayable is None:  # the graph's ops decide it: looked at once, noted once
            self.unreplayable = cuda_graphs.ineligible(self.gm)
            if self.unreplayable:
                self.report.notes.append(f"not replayed as a CUDA graph: {self.unreplayable}")
        return not self.unreplayable

    def _replayed(self, fn: Callable[..., Any], args: Sequence[Any]) -> Callable[..., Any]:
        """`fn` for these arguments' sizes, replayed as a CUDA graph where that keeps its meaning."""
        if not self._will_replay(args):
            return fn
        self.report.replayed += 1
        return cuda_graphs.Replayed(fn, cuda_graphs.static_inputs(self.gm, args), self._dropped,
                                    saved_from=self.gm.meta.get(SAVED_FROM), remark=self.report.notes.append)

    def _dropped(self, why: str) -> None:
        self.report.replayed -= 1
        self.report.notes.append(why)

    def _how(self, cached: Path, spec: str, replay: bool) -> dict[str, Any]:
        """translate's options for this graph: `spec` the --dynamic spec of a graph with symbolic sizes ("" for
        one written at these sizes), `replay` whether the module is replayed as a CUDA graph; the verifier's
        build kept in the entry, which the module loads (`built.py`) rather than compiling again."""
        return dict(timing=False, allow_opaque=True, seeds=self.opts.seeds, dynamic=spec or None,
                    build_cache=str(cached / "build"), graph_replay=replay)

    def _translate(self, args: Sequence[Any], cached: Path, spec: str = "", replay: bool = False) -> list[str]:
        """The module written and verified here, into its cache entry; notes for the report."""
        with tempfile.TemporaryDirectory(prefix="akg-dynamo-") as tmp:
            problem = _write_problem(self.gm, args, Path(tmp), self.kind, self.sizes)
            return dynamo_background.write_entry(problem, cached, self.report.dsl, self.report.target,
                                                 self._how(cached, spec, replay))

    def _start(self, args: Sequence[Any], cached: Path, spec: str, replay: bool) -> Future[tuple[str, list[str]]]:
        """The module written and verified by the background translator; the problem staged here."""
        problem = _write_problem(self.gm, args, Path(tempfile.mkdtemp(prefix="akg-dynamo-")), self.kind, self.sizes)
        job = dynamo_background.translator().submit(
            {"problem": str(problem), "entry": str(cached), "dsl": self.report.dsl, "target": self.report.target,
             "how": self._how(cached, spec, replay)})
        job.add_done_callback(lambda _: dynamo_background.staged(problem))
        self.pending.append(job)
        return job


def _tensors_only(fn: Callable[..., Any], tensors: list[int], *args: Any) -> Any:
    return fn(*[args[i] for i in tensors])


def _pick(opts: Options, example_inputs: Sequence[Any]) -> tuple[str, str]:
    """The options' DSL and target, or those of the inputs' device (its hardware model, and the
    backend its manifest prefers there)."""
    target = opts.target
    if not target:
        dev = next((a.device for a in example_inputs if isinstance(a, torch.Tensor) and a.device.type != "cpu"),
                   torch.device("cpu"))
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else ""
        target = target_for_device(dev.type, name)
    return opts.dsl or default_dsl(load_target(target)), target


def _batched(gm: torch.fx.GraphModule) -> bool:
    """Whether dynamo's graph calls functorch's batching (torch.vmap), which a problem file cannot replay."""
    return any(n.op == "call_function" and "batch_dim" in str(n.target) for n in gm.graph.nodes)


def _needs_grad(example_inputs: Sequence[Any]) -> bool:
    return torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in example_inputs)


def _prestart(opts: Options, target: str, dsl: str) -> None:
    """The verifier's fork server started ahead of the first verification: the background translator's, which
    verifies under first_call="eager" (started now with it), or this process's."""
    if opts.first_call == "eager":
        dynamo_background.translator().prestart(target, dsl)
    else:
        prestart_for(target, ahead=True, dsl=dsl)


class AkgBackend:
    """A dynamo backend holding its options and a report of every graph it was given."""

    def __init__(self, options: dict[str, Any] | None = None):
        self.opts = Options.of(options)
        self.report = Report()

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        name = f"graph{len(self.report.graphs) + len(self.report.fallbacks)}"
        dsl, target = _pick(self.opts, example_inputs)
        _prestart(self.opts, target, dsl)  # its imports overlap the rest of dynamo's work and the lift

        def written(g: torch.fx.GraphModule, kind: str) -> CompiledGraph:
            """Each graph, a training step's forward and backward too, replayed as a CUDA graph where eligible."""
            rep = GraphReport(f"{name}.{kind}" if kind != "inference" else name, dsl, target)
            self.report.graphs.append(rep)
            return CompiledGraph(g, self.opts, rep, kind=kind, replayable=True, pending=self.report.pending)

        if _needs_grad(example_inputs):
            if self.opts.training == "akg":
                return compile_training(gm, example_inputs, written)
            why = f"{name} needs gradients and options={{'training': 'fallback'}}: handed to {self.opts.fallback}"
            self.report.fallbacks.append(why)
            if self.opts.fallback == "eager":
                return gm.forward
            return torch._dynamo.lookup_backend(self.opts.fallback)(gm, example_inputs)
        # AOTAutograd's functional graph where the written module alone would be wrong: writes in place
        # (copied back to the caller's tensors by AOTAutograd after each call; a module returns values only),
        # or torch.vmap (a mask), whose functorch calls a problem file cannot replay
        if cuda_graphs.writes_in_place(gm) or _batched(gm):
            return compile_inference(gm, example_inputs, written)
        return written(gm, "inference")


def akg_backend(gm: torch.fx.GraphModule, example_inputs: list[Any],
                options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The `torch_dynamo_backends` entry point: `torch.compile(model, backend="akg", options={...})`."""
    return AkgBackend(options)(gm, example_inputs)


def compile(model: Callable[..., Any], *, dsl: str = "", target: str = "", dynamic: bool | None = None,
            **options: Any) -> Any:
    """`torch.compile` with akg's backend; the result's `akg_report` says what became akg kernels."""
    backend = AkgBackend({"dsl": dsl, "target": target, **options})
    if isinstance(model, torch.nn.Module):  # the verifier's fork server imports while dynamo traces
        dsl, target = _pick(backend.opts, list(model.parameters())[:1])
        _prestart(backend.opts, target, dsl)  # the weights' device's
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    compiled.akg_report = backend.report
    if isinstance(compiled, torch.nn.Module):
        handle = compiled.register_forward_hook(lambda *_: _no_graph_warning(backend.report, handle))
        if any(isinstance(m, torch.nn.RNNBase) for m in model.modules()):
            _trace_recurrences(compiled)
    return compiled


def _trace_recurrences(compiled: torch.nn.Module) -> None:
    """Dynamo skips a whole frame holding an RNN, GRU or LSTM unless `allow_rnn` is set (the model then ran as
    eager, with only a warning): set it while this model's calls run (a trace or recompile happens inside
    one) and restore the caller's value after; other models compiled in the process keep theirs."""
    config = torch._dynamo.config
    saved: list[bool] = []

    def before(*_: Any) -> None:
        saved.append(config.allow_rnn)
        config.allow_rnn = True

    def after(*_: Any) -> None:
        if saved:
            config.allow_rnn = saved.pop()

    compiled.register_forward_pre_hook(before)
    compiled.register_forward_hook(after, always_call=True)


def _no_graph_warning(report: Report, handle: Any) -> None:
    """After the first call: say when it handed akg no graph, so dynamo ran the model as eager (it skips a
    whole frame at a graph break inside a loop, such as a data-dependent `torch.where` per expert); the hook
    is removed either way (no cost on later calls)."""
    handle.remove()
    if not report.graphs and not report.fallbacks:
        warnings.warn("akg: torch.compile handed akg no graph, so the model ran as eager (dynamo skips a "
                      "frame with a graph break inside a loop: see TORCH_LOGS=graph_breaks)", stacklevel=3)
