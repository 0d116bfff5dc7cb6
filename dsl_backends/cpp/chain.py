"""A chain of C++ kernels (`dsl_backends.chain`) as one `extern "C"` function: it calls each kernel with the
pointers forward would have passed, its scratch buffers placed in one block per thread, kept between calls
(no allocation, and the block a recurrent step reuses stays in cache)."""

from __future__ import annotations

from collections.abc import Mapping

from ir.kernel.ir import Kernel, KernelProgram, size_args

from ..chain import Chain
from ..module_helpers import huge_allocation
from .pack import weight_bufs
from .pyext import SIGNATURE

HELPERS = r'''#ifndef AKG_CHAIN_HELPERS
#define AKG_CHAIN_HELPERS
struct akg_any_ptr {  // a pointer argument taken as the kernel's parameter declares it
    void* p;
    template <typename T> operator T*() const { return static_cast<T*>(p); }
};
static inline char* akg_chain_scratch(size_t n) {  // one block per thread, 64-byte aligned, kept between calls
    static thread_local std::vector<char> v;
    if (v.size() < n + 64) v.resize(n + 64);
    const uintptr_t at = (reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63);
    return reinterpret_cast<char*>(at);
}
#endif
'''


def can_chain(k: Kernel) -> bool:
    """A kernel whose launch is one call of its buffers' pointers: no packed weights (their launch keeps a
    packed copy between calls), no run-time sizes, a fresh output, no huge-page allocation."""
    return not weight_bufs(k) and not size_args(k) and not k.in_place and all(
        isinstance(d, int) for b in (*k.inputs(), *k.outs()) for d in b.shape) and not any(
        huge_allocation(b) for b in k.outs())


def render(chain: Chain, prog: KernelProgram, sources: Mapping[str, str]) -> str:
    """The chain's function: its arguments the chain's inputs then outputs, as forward passes them."""
    kernels = chain.kernels(prog)
    found = {m.group(2): m.group(1) for k in kernels for m in SIGNATURE.finditer(sources[k.name])}
    args = {b.name: f"a{i}" for i, b in enumerate((*chain.inputs, *chain.outputs))}
    at = {b.name: f"akg_any_ptr{{s + {off}}}" for b, off in chain.scratch}
    lines = [HELPERS, 'extern "C" {', *(f"{found[k.name]};" for k in kernels), "}",
             f'extern "C" void {chain.name}({", ".join(f"void* {a}" for a in args.values())}) {{']
    if chain.scratch:
        lines.append(f"    char* const s = akg_chain_scratch({chain.scratch_bytes});")
    for k in kernels:
        ptrs = [at.get(b.name) or f"akg_any_ptr{{{args[b.name]}}}" for b in (*k.inputs(), *k.outs())]
        lines.append(f"    {k.name}({', '.join(ptrs)});")
    return "\n".join([*lines, "}"])


def arity(name: str, text: str) -> int:
    """How many pointers chain `name` (its source `text`) takes."""
    m = next(m for m in SIGNATURE.finditer(text) if m.group(2) == name)
    return m.group(1).count("void*")
