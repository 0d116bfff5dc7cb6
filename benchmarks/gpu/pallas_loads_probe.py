"""Pallas (Triton lowering) on the H100: loads through index arrays (akg's flat gathers) against BlockSpec'd
blocks, for a pointwise kernel and an RMS norm row kernel, 16384 x 8192 fp32; with and without x64.
Why Pallas' memory-bound modules ran at about 1.5 TB/s where Triton's reach 2.4 (run 2026-11-26: gathers are not
the cause, see pallas_module_probe.py).  python benchmarks/gpu/pallas_loads_probe.py"""
import time

import jax
import jax.experimental.pallas.triton as plt
import jax.numpy as jnp
from jax.experimental import pallas as pl

R, C = 16384, 8192
N = R * C
x = jax.random.normal(jax.random.key(0), (N,), jnp.float32)
w = jnp.ones((C,), jnp.float32)
x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64


def bench(name, f, *args, n=30):
    y = f(*args)
    y.block_until_ready()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f(*args).block_until_ready()
        ts.append(time.perf_counter() - t0)
    ms = sorted(ts)[n // 2] * 1e3
    print(f"{name:58s} {ms:.3f} ms  {2 * N * 4 / ms / 1e9:.2f} TB/s(eff)")
    return y


def params(nw):
    return plt.CompilerParams(num_warps=nw, num_stages=1)


for BLOCK, nw in ((1024, 4), (2048, 8), (4096, 8)):
    def kA(x_ref, o_ref, BLOCK=BLOCK):
        offs = pl.program_id(0) * BLOCK + jnp.arange(0, BLOCK, dtype=jnp.int32)
        m = offs < N
        v = plt.load(x_ref.at[offs], mask=m, other=0.0)
        plt.store(o_ref.at[pl.ds(0, BLOCK)], (v * 2.0).astype(jnp.float32), mask=m)
    fA = jax.jit(pl.pallas_call(kA, out_shape=jax.ShapeDtypeStruct((N,), jnp.float32), grid=(N // BLOCK,),
                                out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)), compiler_params=params(nw)))

    def kB(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
    fB = jax.jit(pl.pallas_call(kB, out_shape=jax.ShapeDtypeStruct((N,), jnp.float32), grid=(N // BLOCK,),
                                in_specs=[spec], out_specs=spec, compiler_params=params(nw)))
    bench(f"pointwise gather BLOCK={BLOCK} warps={nw}", fA, x)
    with x64(True):
        bench(f"pointwise gather x64 BLOCK={BLOCK} warps={nw}", fA, x)
    bench(f"pointwise blocked BLOCK={BLOCK} warps={nw}", fB, x)

ref = jax.jit(lambda x: x * 2.0)
bench("XLA x * 2", ref, x)

for BM, nw in ((1, 8), (1, 16), (2, 16)):
    def kR(x_ref, w_ref, o_ref, BM=BM):
        rows = pl.program_id(0) * BM + jnp.arange(0, BM, dtype=jnp.int32)[:, None]
        j = jnp.arange(0, C, dtype=jnp.int32)[None, :]
        idx = rows * C + j
        m = (rows < R) & (j < C)
        v = plt.load(x_ref.at[jnp.broadcast_to(idx, (BM, C))], mask=jnp.broadcast_to(m, (BM, C)), other=0.0)
        r = jax.lax.rsqrt(jnp.sum(jnp.where(m, v * v, 0.0), axis=1, keepdims=True) / C + 1e-6)
        wv = plt.load(w_ref.at[j], mask=j < C, other=0.0)
        plt.store(o_ref.at[jnp.broadcast_to(idx, (BM, C))], v * r * wv, mask=jnp.broadcast_to(m, (BM, C)))
    fR = jax.jit(pl.pallas_call(kR, out_shape=jax.ShapeDtypeStruct((N,), jnp.float32), grid=(R // BM,),
                                compiler_params=params(nw)))

    def kS(x_ref, w_ref, o_ref):
        v = x_ref[...]
        r = jax.lax.rsqrt(jnp.sum(v * v, axis=1, keepdims=True) / C + 1e-6)
        o_ref[...] = v * r * w_ref[...]
    s2 = pl.BlockSpec((BM, C), lambda i: (i, 0))
    fS = jax.jit(pl.pallas_call(kS, out_shape=jax.ShapeDtypeStruct((R, C), jnp.float32), grid=(R // BM,),
                                in_specs=[s2, pl.BlockSpec((1, C), lambda i: (0, 0))], out_specs=s2,
                                compiler_params=params(nw)))
    with x64(True):
        bench(f"rms gather+scatter x64 BM={BM} warps={nw}", fR, x, w)
    bench(f"rms gather+scatter BM={BM} warps={nw}", fR, x, w)
    bench(f"rms blocked BM={BM} warps={nw}", fS, x.reshape(R, C), w.reshape(1, C))
