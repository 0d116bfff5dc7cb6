"""`akg tune --learned`: a model of the measurements so far picks which schedules of a kernel are worth
compiling and timing. Each measured schedule is a row: its features (the kernel's kind and size, the
schedule's parameters and their change from the default, its place in the cost model's order) and its time
relative to the kernel's default schedule. A small random forest (bootstrapped regression trees over a
third of the features each split, as Helion's autotuner filters its candidates) predicts that ratio for
the candidates not measured yet; a kernel's default and those of the best predicted quarter predicted
faster than it are measured, the rest never compiled. Before the forest has rows enough, the cost model's
order picks. Rows are kept in the tuning database, so one problem's tune teaches the next."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

Features = dict[str, float]


def features(k: Kernel, s: Schedule, default: Schedule, rank: int, n: int) -> Features:
    """What a row knows of a candidate: numbers on a log scale (a tile twice as wide is one step)."""
    f: Features = {f"kind={k.kind}": 1.0, "log_numel": math.log2(max(k.out.numel, 1)),
                   "log_last": math.log2(max(k.coords[-1].extent if k.coords else 1, 1)),
                   "rank": rank / max(n - 1, 1)}
    for key, v in s.items():
        if isinstance(v, bool):
            f[f"s:{key}"] = float(v)
        elif isinstance(v, (int, float)) and v > 0:
            f[f"s:{key}"] = math.log2(v)
            d = default.get(key)
            if isinstance(d, (int, float)) and not isinstance(d, bool) and d > 0:
                f[f"d:{key}"] = math.log2(v / d)
        else:
            f[f"s:{key}={v}"] = 1.0
    f["changes"] = float(sum(s.get(key) != default.get(key) for key in set(s) | set(default)))
    return f


@dataclass
class _Node:
    value: float
    feature: int = -1
    threshold: float = 0.0
    left: _Node | None = None
    right: _Node | None = None


def _grow(xs: list[list[float]], ys: list[float], idx: list[int], depth: int, rng: random.Random,
          min_leaf: int) -> _Node:
    mean = sum(ys[i] for i in idx) / len(idx)
    node = _Node(mean)
    if depth == 0 or len(idx) < 2 * min_leaf:
        return node
    nf, n = len(xs[0]), len(idx)
    total, total_sq = sum(ys[i] for i in idx), sum(ys[i] ** 2 for i in idx)
    best = (total_sq - total * total / n - 1e-12, -1, 0.0)
    for j in rng.sample(range(nf), max(1, nf // 3)):  # one sweep over the sorted values per feature
        pairs = sorted((xs[i][j], ys[i]) for i in idx)
        s = sq = 0.0
        for m in range(1, n):
            s, sq = s + pairs[m - 1][1], sq + pairs[m - 1][1] ** 2
            if pairs[m - 1][0] == pairs[m][0] or m < min_leaf or n - m < min_leaf:
                continue
            sse = sq - s * s / m + (total_sq - sq) - (total - s) ** 2 / (n - m)
            if sse < best[0]:
                best = (sse, j, (pairs[m - 1][0] + pairs[m][0]) / 2)
    if best[1] < 0:
        return node
    _, j, t = best
    node.feature, node.threshold = j, t
    node.left = _grow(xs, ys, [i for i in idx if xs[i][j] <= t], depth - 1, rng, min_leaf)
    node.right = _grow(xs, ys, [i for i in idx if xs[i][j] > t], depth - 1, rng, min_leaf)
    return node


def _predict(node: _Node, x: Sequence[float]) -> float:
    while node.left is not None and node.right is not None:
        node = node.left if x[node.feature] <= node.threshold else node.right
    return node.value


class Forest:
    """Bootstrapped regression trees (depth-limited, a random third of the features tried per split);
    the prediction is their mean."""

    def __init__(self, trees: int = 24, depth: int = 4, min_leaf: int = 2, seed: int = 0) -> None:
        self.trees, self.depth, self.min_leaf, self.seed = trees, depth, min_leaf, seed
        self.roots: list[_Node] = []
        self.names: list[str] = []

    def fit(self, rows: Sequence[Features], ys: Sequence[float]) -> Forest:
        self.names = sorted({name for r in rows for name in r})
        xs = [self._vector(r) for r in rows]
        rng = random.Random(self.seed)
        self.roots = []
        for _ in range(self.trees):
            idx = [rng.randrange(len(xs)) for _ in xs]
            self.roots.append(_grow(xs, list(ys), idx, self.depth, rng, self.min_leaf))
        return self

    def _vector(self, r: Features) -> list[float]:
        return [r.get(name, 0.0) for name in self.names]

    def predict(self, r: Features) -> float:
        x = self._vector(r)
        return sum(_predict(root, x) for root in self.roots) / len(self.roots)


@dataclass
class LearnedFilter:
    """Which candidates of a kernel to measure: the default and, by the forest once it has `min_rows` rows,
    at most `share` of the others; before, `share` of them in the cost model's order (at least two)."""

    share: float = 0.25
    min_rows: int = 8
    rows: list[tuple[Features, float]] = field(default_factory=list)
    by_model: int = 0  # kernels whose picks the forest made

    def pick(self, k: Kernel, cands: Sequence[Schedule]) -> list[int]:
        """Indices into `cands` (the default first, then the cost model's order) to measure: the default
        and, once the forest has rows, those of the best predicted quarter of the others that it predicts
        faster than the default (none where it predicts none); before, the cost model's first ones."""
        n = len(cands)
        if len(self.rows) < self.min_rows:
            return list(range(min(n, max(2, math.ceil(n * self.share)))))
        if n == 1:
            return [0]
        forest = Forest().fit([r for r, _ in self.rows], [y for _, y in self.rows])
        guess = {i: forest.predict(features(k, cands[i], cands[0], i, n)) for i in range(1, n)}
        self.by_model += 1
        best = sorted(guess, key=lambda i: (guess[i], i))[:math.ceil((n - 1) * self.share)]
        return [0, *sorted(i for i in best if guess[i] < GAIN)]

    def learn(self, k: Kernel, cands: Sequence[Schedule], times: dict[int, float]
              ) -> list[tuple[Schedule, Features, float]]:
        """Rows from a kernel's measured candidates (each time against the default's); the new rows with
        their schedules."""
        base = times.get(0)
        if base is None or not math.isfinite(base) or base <= 0:
            return []
        new = [(cands[i], features(k, cands[i], cands[0], i, len(cands)),
                math.log(t / base) if math.isfinite(t) else FAILED) for i, t in sorted(times.items()) if i != 0]
        self.rows += [(f, y) for _, f, y in new]
        return new


FAILED = 2.0  # a candidate that failed, as a log ratio: seven times slower than the default
GAIN = math.log(0.98)  # a candidate is measured where the forest predicts it 2% faster than the default or more
