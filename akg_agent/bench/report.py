"""A self-contained HTML report: summary, per-problem table, and SVG plots (no plotting library)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

BAR_W, PLOT_H = 26, 220


def _bars(title: str, items: Sequence[tuple[str, float | None]], ref: float | None, log: bool, unit: str) -> str:
    vals = [v for _, v in items if v]
    if not vals:
        return f"<h3>{html.escape(title)}</h3><p>no data</p>"
    if log:
        lo = min(min(vals), ref or min(vals)) / 1.5
        hi = max(max(vals), ref or max(vals)) * 1.5
        scale = lambda v: (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))  # noqa: E731
    else:
        lo, hi = 0.0, max(max(vals), ref or 0) * 1.1 or 1.0
        scale = lambda v: (v - lo) / (hi - lo)  # noqa: E731
    width = max(320, len(items) * (BAR_W + 4) + 60)
    parts = [f'<h3>{html.escape(title)}</h3><svg width="{width}" height="{PLOT_H + 90}" '
             f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="10">']
    for i, (name, v) in enumerate(items):
        x = 50 + i * (BAR_W + 4)
        if v:
            # bars grow from the reference line when there is one (up: better, down: worse)
            base = scale(ref) * PLOT_H if (ref is not None and log) else 0.0
            top = scale(v) * PLOT_H
            y0, h = PLOT_H + 10 - max(top, base), max(1.0, abs(top - base))
            color = "#2a9d8f" if ref is None or v >= ref else "#e76f51"
            parts.append(f'<rect x="{x}" y="{y0:.1f}" width="{BAR_W}" height="{h:.1f}" fill="{color}">'
                         f'<title>{html.escape(name)}: {v:.3g}{unit}</title></rect>'
                         f'<text x="{x}" y="{y0 - 2:.1f}">{v:.2g}</text>')
        else:
            parts.append(f'<text x="{x + 6}" y="{PLOT_H + 5}" fill="#999">x</text>')
        parts.append(f'<text transform="translate({x + 12},{PLOT_H + 16}) rotate(60)">{html.escape(name[:28])}</text>')
    if ref is not None:
        y = PLOT_H - scale(ref) * PLOT_H + 10
        parts.append(f'<line x1="45" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333" stroke-dasharray="4"/>'
                     f'<text x="2" y="{y + 3:.1f}">{ref:g}{unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _histogram(title: str, values: Sequence[float]) -> str:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return f"<h3>{html.escape(title)}</h3><p>no data</p>"
    edges = [0.25, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, math.inf]
    labels = ["<0.25", "0.25-0.5", "0.5-0.8", "0.8-1", "1-1.25", "1.25-1.5", "1.5-2", "2-3", "3-5", ">5"]
    counts = [0] * len(labels)
    for v in vals:
        counts[next(i for i, e in enumerate(edges) if v < e)] += 1
    return _bars(title, list(zip(labels, [float(c) or None for c in counts])), None, False, " problems")


def _spread(r: dict[str, Any], b: str) -> str:
    """The paired speedups' quartiles, where the timing kept each trial."""
    q = r.get("speedup_quartiles", {}).get(b)
    return f" ({q[0]:.3g}-{q[1]:.3g})" if q else ""


def _noise(r: dict[str, Any]) -> str:
    """The run's A/A control: eager against a second eager, the quartiles of its paired speedups."""
    q = r.get("noise_quartiles")
    return f"{q[0]:.3g}-{q[1]:.3g}" if q else ""


def render(records: Sequence[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]) -> str:
    baselines = meta.get("baselines", [])
    rows = []
    for r in records:
        sp = " ".join(f"{b}: {r['speedup'][b]:.3g}x{_spread(r, b)}" for b in baselines if r.get("speedup", {}).get(b))
        cand = r.get("candidate_ms")
        peers = "; ".join(f"{lb}: " + (" ".join(f"{b} {p['speedup'][b]:.3g}x" for b in baselines
                                                if p.get("speedup", {}).get(b)) or p.get("reason", "failed"))
                          for lb, p in r.get("peers", {}).items())
        plan = "; ".join(f"group {g}: {what}" for g, what in r.get("groups", {}).items())
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r["problem"], "yes" if r.get("correct") else "no", r.get("reason", ""),
            f"{cand:.4g}" if cand else "", sp, _noise(r), peers,
            f"{r['sol_fraction']:.1%}" if r.get("sol_fraction") else "",
            f"{r['guard_us']:.2f}" if r.get("guard_us") is not None else "",
            r.get("strategy", ""), plan)) + "</tr>")
    plots = [_bars(f"speedup vs {b} (log scale)", [(r["problem"], r.get("speedup", {}).get(b)) for r in records],
                   1.0, True, "x") for b in baselines]
    first = baselines[0] if baselines else None
    if first:
        plots.append(_histogram(f"distribution of speedups vs {first}",
                                [r.get("speedup", {}).get(first) for r in records if r.get("correct")]))
    plots.append(_bars("fraction of speed-of-light", [(r["problem"], r.get("sol_fraction")) for r in records],
                       None, False, ""))
    summ = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items())
    head = "".join(f"<th>{h}</th>" for h in ("problem", "correct", "reason", "candidate ms", "speedup",
                                            "A/A noise (eager vs eager)", "side by side (pure, other DSLs)",
                                            "of SOL", "input guard us",
                                            "strategy", "per group"))
    info = html.escape(", ".join(f"{k}={v}" for k, v in meta.items()))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>akg bench</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px}}</style></head><body>
<h1>akg bench</h1><p>{info}</p><h2>Summary</h2><table>{summ}</table>
<h2>Plots</h2>{''.join(plots)}<h2>Problems</h2><table><tr>{head}</tr>{''.join(rows)}</table></body></html>
"""
