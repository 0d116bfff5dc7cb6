"""Pointwise kernels with 128-bit memory operations: each thread loads the consecutive elements of 16 bytes of
its narrowest operand (four fp32 or eight bf16/fp16 elements; a wider operand in as many 16-byte loads as
that takes) of every input read at the output's own index, computes that many outputs and stores them the
same way. Pointers are checked for 16-byte alignment at run time (a contiguous view can start anywhere); the
scalar grid-stride loop serves unaligned calls and sizes that are not a multiple of the vector."""

from __future__ import annotations

from ir.kernel.ir import Kernel, Load, Var, walk

from ..cstyle import CPrinter, CStyle, decode

SIZES = {"f32": 4, "bf16": 2, "f16": 2}  # the element types a vector moves, and their bytes


def identity_loads(k: Kernel) -> list[Load]:
    """Float loads at exactly the output element being computed (same shape, same coordinates)."""
    names = tuple(v.name for v in k.coords)
    return [e for e in walk(k.expr) if isinstance(e, Load) and e.mask is None and e.buf.dtype in SIZES
            and e.buf.shape == k.out.shape and tuple(i.name if isinstance(i, Var) else None for i in e.index) == names]


def width(k: Kernel) -> int:
    """Elements per thread: 16 bytes of the narrowest of the output and the identity loads."""
    return 16 // min(SIZES[d] for d in [k.out.dtype, *(e.buf.dtype for e in identity_loads(k))])


def eligible(k: Kernel) -> bool:
    return k.kind == "pointwise" and not k.also and k.out.dtype in SIZES and bool(identity_loads(k)) \
        and k.out.numel % width(k) == 0


def vector_lines(k: Kernel, style: CStyle, scalar: list[str]) -> list[str]:
    """The 16-byte loop when every pointer is aligned, else the `scalar` loop lines."""
    loads, vec = identity_loads(k), width(k)
    bufs = {e.buf.name: e.buf.dtype for e in loads}
    aligned = " | ".join(f"(uintptr_t){b}" for b in [*sorted(bufs), "out"])

    def chunks(dtype: str) -> int:  # 16-byte loads or stores per thread for an operand of this type
        return vec * SIZES[dtype] // 16

    lines = [f"    if ((({aligned}) & 15) == 0) {{",
             f"        for (int64_t akg_iv = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; akg_iv < "
             f"{k.out.numel // vec}; akg_iv += (int64_t)gridDim.x * blockDim.x) {{"]
    for b, dt in sorted(bufs.items()):
        lines.append(f"            alignas(16) {style.ctype(dt)} akg_{b}_e[{vec}];")
        lines += [f"            reinterpret_cast<uint4*>(akg_{b}_e)[{j}] = "
                  f"__ldg(reinterpret_cast<const uint4*>({b}) + akg_iv * {chunks(dt)} + {j});"
                  for j in range(chunks(dt))]
    lines += [f"            alignas(16) {style.ctype(k.out.dtype)} akg_o[{vec}];", "            #pragma unroll",
              f"            for (int akg_e = 0; akg_e < {vec}; ++akg_e) {{",
              f"                const int64_t akg_i = akg_iv * {vec} + akg_e;"]
    p = CPrinter(style, {}, indent="                ")
    for e in loads:
        p.fixed[id(e)] = style.load(e.buf.dtype, f"akg_{e.buf.name}_e[akg_e]")
    decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
    val = p(k.expr)
    lines += p.lines + [f"                akg_o[akg_e] = {style.store(k.out.dtype, val)};", "            }"]
    n = chunks(k.out.dtype)
    lines += [f"            reinterpret_cast<uint4*>(out)[akg_iv * {n} + {j}] = "
              f"reinterpret_cast<const uint4*>(akg_o)[{j}];" for j in range(n)]
    return lines + ["        }", "    } else {"] + ["    " + ln for ln in scalar] + ["    }"]
