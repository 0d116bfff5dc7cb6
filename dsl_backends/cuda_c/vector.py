"""Pointwise kernels with 128-bit memory operations: each thread loads four consecutive fp32 elements of
every input read at the output's own index as one float4, computes four outputs and stores one float4.
Pointers are checked for 16-byte alignment at run time (a contiguous view can start anywhere); the scalar
grid-stride loop serves unaligned calls and sizes that are not a multiple of four."""

from __future__ import annotations

from ir.kernel.ir import Kernel, Load, Var, walk

from ..cstyle import CPrinter, CStyle, decode

VEC = 4


def identity_loads(k: Kernel) -> list[Load]:
    """fp32 loads at exactly the output element being computed (same shape, same coordinates)."""
    names = tuple(v.name for v in k.coords)
    return [e for e in walk(k.expr) if isinstance(e, Load) and e.mask is None and e.buf.dtype == "f32"
            and e.buf.shape == k.out.shape and tuple(i.name if isinstance(i, Var) else None for i in e.index) == names]


def eligible(k: Kernel) -> bool:
    return k.kind == "pointwise" and k.out.dtype == "f32" and k.out.numel % VEC == 0 and bool(identity_loads(k))


def vector_lines(k: Kernel, style: CStyle, scalar: list[str]) -> list[str]:
    """The float4 loop when every pointer is aligned, else the `scalar` loop lines."""
    loads = identity_loads(k)
    bufs = sorted({e.buf.name for e in loads})
    aligned = " | ".join(f"(uintptr_t){b}" for b in [*bufs, "out"])
    lines = [f"    if ((({aligned}) & 15) == 0) {{",
             f"        for (int64_t akg_i4 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; akg_i4 < "
             f"{k.out.numel // VEC}; akg_i4 += (int64_t)gridDim.x * blockDim.x) {{"]
    for b in bufs:
        lines += [f"            const float4 akg_{b}4 = __ldg(reinterpret_cast<const float4*>({b}) + akg_i4);",
                  f"            const float akg_{b}_e[4] = {{akg_{b}4.x, akg_{b}4.y, akg_{b}4.z, akg_{b}4.w}};"]
    lines += ["            float akg_o[4];", "            #pragma unroll",
              "            for (int akg_e = 0; akg_e < 4; ++akg_e) {",
              "                const int64_t akg_i = akg_i4 * 4 + akg_e;"]
    p = CPrinter(style, {}, indent="                ")
    for e in loads:
        p.fixed[id(e)] = f"akg_{e.buf.name}_e[akg_e]"
    decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
    val = p(k.expr)
    lines += p.lines + [f"                akg_o[akg_e] = {style.store(k.out.dtype, val)};", "            }",
                        "            reinterpret_cast<float4*>(out)[akg_i4] = "
                        "make_float4(akg_o[0], akg_o[1], akg_o[2], akg_o[3]);", "        }", "    } else {"]
    return lines + ["    " + ln for ln in scalar] + ["    }"]
