"""Compile every Triton kernel of a written module for sm_90 on this CPU machine (Triton builds TTIR to
cubin without a GPU), as the GPU would when the module first runs: a kernel that only the interpreter
accepts fails here. Run in a process of its own (TRITON_INTERPRET unset): `python -m tests.tools.triton_sm90
MODULE.py KERNELS.json`, where KERNELS.json maps each kernel to its pointer dtypes and constexprs."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

POINTERS = {"f32": "*fp32", "f16": "*fp16", "bf16": "*bf16", "f64": "*fp64", "i64": "*i64", "i32": "*i32",
            "bool": "*i1", "i8": "*i8", "u8": "*u8"}


def main(module: str, kernels: str) -> int:
    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("written", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    failed = []
    for name, want in json.loads(open(kernels).read()).items():
        fn = getattr(mod, name)
        sig = {p: (POINTERS[want["pointers"][p]] if p in want["pointers"] else "constexpr") for p in fn.arg_names}
        consts = {k: v for k, v in want["constexprs"].items() if k in fn.arg_names}
        if "BOUNDED" in fn.arg_names:  # what a compiled module passes (`_AKG_COMPILED`): loops bound by program id
            consts["BOUNDED"] = True
        try:
            triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts),
                           target=GPUTarget("cuda", 90, 32))
        except Exception as e:  # noqa: BLE001 - each kernel's failure is reported
            failed.append(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    print("\n".join(failed) or "all compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
