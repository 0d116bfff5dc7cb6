"""C++ backend: OpenMP-parallel outer loops, vectorisable inner loops, a row-streaming GEMM; one
shared library per module, built with -O3 for the host and cached by a hash of source, flags and CPU."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Buf, Kernel, KernelProgram

from ..base import Manifest
from ..cstyle import CPrinter, CStyle, decode, row_sweep, split_gemm
from ..exprs import row_coords
from ..module import COMPILE_CACHED, write_module

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))

PRELUDE_CPP = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include <algorithm>
static inline float akg_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
static inline uint16_t akg_f32_to_bf16(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16); }
static inline float akg_f16_to_f32(uint16_t h) { return (float)(*(const _Float16*)&h); }
static inline uint16_t akg_f32_to_f16(float f) {
    _Float16 h = (_Float16)f; uint16_t u; std::memcpy(&u, &h, 2); return u; }
"""

BUILD = COMPILE_CACHED + '''
import platform as _platform

_AKG_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17"]


def _akg_cpu():  # -march=native ties a library to the host CPU: part of the cache key
    try:
        return next(ln for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return _platform.processor() or _platform.machine()


_AKG_LIB = _akg_compile(_AKG_SOURCE, ["g++", *_AKG_FLAGS], ".cpp", "cpp", _akg_cpu())
'''


class CppStyle(CStyle):
    math_ns = "std::"
    restrict = "__restrict__"


STYLE = CppStyle()


def _signature(k: Kernel) -> str:
    ins = [f"const {STYLE.ctype(b.dtype)}* {STYLE.restrict} {b.name}" for b in k.inputs()]
    return f'extern "C" void {k.name}({", ".join(ins + [f"{STYLE.ctype(k.out.dtype)}* {STYLE.restrict} out"])})'


def _omp(k: Kernel) -> str:
    t = k.schedule.get("threads")
    return f"    #pragma omp parallel for schedule(static){f' num_threads({t})' if t else ''}"


def render_kernel(k: Kernel) -> str:
    lines = [_signature(k) + " {"]
    if k.kind == "matmul":
        lines += _matmul(k)
    elif k.kind == "rownorm":
        lines += _rownorm(k)
    else:
        n = k.out.numel
        lines.append(_omp(k))
        lines.append(f"    for (int64_t akg_i = 0; akg_i < {n}; ++akg_i) {{")
        p = CPrinter(STYLE, {}, indent="        ")
        decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
        val = p(k.expr)
        lines += p.lines
        lines.append(f"        out[akg_i] = {STYLE.store(k.out.dtype, val)};")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines)


def _rownorm(k: Kernel) -> list[str]:
    """Per row (in parallel): its reductions once, innermost first, then a vectorisable sweep over
    the columns writing the output."""
    row_c, cols = row_coords(k)
    rows, n = math.prod(v.extent for v in row_c), math.prod(e for _, e in cols)
    out = [_omp(k), f"    for (int64_t akg_row = 0; akg_row < {rows}; ++akg_row) {{"]
    p = CPrinter(STYLE, {}, indent="        ")
    decode([(v.name, v.extent) for v in row_c], "akg_row", p)
    loop = f"for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{"
    out += row_sweep(STYLE, k, p, cols, loop, "#pragma omp simd")
    return out + ["    }"]


def _matmul(k: Kernel) -> list[str]:
    """B packed once per call (prologue applied once per element, contiguous along N: weights stored
    transposed stream too), then per output row a vector of accumulators swept over K."""
    g = split_gemm(k)
    dot, a_e, b_e, kv, n_vars = g.dot, g.a, g.b, g.k, g.cols
    row_vars = [(v.name, v.extent) for v in k.coords if (v.name, v.extent) not in n_vars]  # batch, then rows
    rows, n, kk = math.prod(e for _, e in row_vars), math.prod(e for _, e in n_vars), kv.extent
    batches = math.prod(e for _, e in g.batch)
    bt = STYLE.ctype_compute(b_e.dtype)
    out = [f"    std::vector<{bt}> akg_bp((size_t){batches * kk * n});", _omp(k),
           f"    for (int64_t akg_p = 0; akg_p < {batches * kk}; ++akg_p) {{",
           f"        const int64_t akg_batch = akg_p / {kk}, {kv.name} = akg_p % {kk};"]
    pp = CPrinter(STYLE, {kv.name: kv.name}, prefix="p", indent="        ")
    decode(g.batch, "akg_batch", pp)
    out += pp.lines
    out.append(f"        for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{")
    pb = CPrinter(STYLE, dict(pp.env), prefix="b", indent="            ")
    decode(n_vars, "akg_col", pb)
    b_val = pb(b_e)
    out += pb.lines + [f"            akg_bp[akg_p * {n} + akg_col] = {b_val};", "        }", "    }"]
    out += [_omp(k), f"    for (int64_t akg_row = 0; akg_row < {rows}; ++akg_row) {{",
            f"        std::vector<double> akg_acc({n}, 0.0);"]
    p = CPrinter(STYLE, {}, indent="        ")
    decode(row_vars, "akg_row", p)
    bflat = "0"
    for name, ext in g.batch:
        bflat = f"({bflat} * {ext} + {name})"
    p.emit(f"const {bt}* akg_b = akg_bp.data() + {bflat} * {kk * n};")
    out += p.lines
    p.lines = []
    out.append(f"        for (int64_t {kv.name} = 0; {kv.name} < {kk}; ++{kv.name}) {{")
    pa = CPrinter(STYLE, dict(p.env, **{kv.name: kv.name}), prefix="a", indent="            ")
    a_val = pa(a_e)
    out += pa.lines
    out += [f"            const double akg_a = (double)({a_val});",
            f"            const {bt}* akg_brow = akg_b + {kv.name} * {n};", "            #pragma omp simd",
            f"            for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) "
            "akg_acc[akg_col] += akg_a * (double)akg_brow[akg_col];", "        }"]
    out.append(f"        for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{")
    pe = CPrinter(STYLE, dict(p.env), prefix="e", indent="            ")
    pe.fixed[id(dot)] = f"(({STYLE.ctype_compute(k.out.dtype)})akg_acc[akg_col])"
    decode(n_vars, "akg_col", pe)
    val = pe(k.expr)
    out += pe.lines
    strides = k.out.strides()
    flat = " + ".join(f"{v.name} * {s}" if s != 1 else v.name for v, s in zip(k.coords, strides)) or "0"
    out += [f"            out[{flat}] = {STYLE.store(k.out.dtype, val)};", "        }", "    }"]
    return out


class CppBackend:
    manifest = MANIFEST

    def default_schedule(self, k: Kernel, target: HardwareModel, executor: str) -> dict[str, Any]:
        return {}  # OpenMP's own thread count; `akg tune` tries explicit ones

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[dict[str, Any]]:
        return [{}] + [{"threads": t} for t in sorted({1, max(1, target.units // 2), target.units})]

    def render_kernel(self, k: Kernel, target: HardwareModel) -> str:
        return render_kernel(k)

    def launch(self, k: Kernel, ref: Callable[[Buf], str]) -> list[str]:
        args = ", ".join(f"{ref(b)}.data_ptr()" for b in k.inputs())
        return [f"_AKG_LIB.{k.name}({args + ', ' if args else ''}{k.out.name}.data_ptr())"]

    def render_module(self, prog: KernelProgram, target: HardwareModel, header: str, meta: dict[str, Any],
                      weights: dict[str, Any]) -> str:
        src = PRELUDE_CPP + "\n\n".join(render_kernel(k) for k in prog.kernels()) + "\n"
        argtypes = "\n".join(f"_AKG_LIB.{k.name}.argtypes = [_ctypes.c_void_p] * {len(k.inputs()) + 1}"
                             for k in prog.kernels())
        prelude = f"_AKG_SOURCE = r'''{src}'''\n" + BUILD + argtypes + "\n"
        return write_module(prog, meta, header, [], prelude, {}, self.launch, weights)


BACKEND = CppBackend()
