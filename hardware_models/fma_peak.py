"""The host's measured fp32 FMA peak, for `akg hw calibrate --target cpu`.

The detected model's peak is cores x clock x lanes x 2 FMA pipes x 2, with the clock from cpufreq or, in a VM
without it, /proc/cpuinfo's "cpu MHz": the nominal clock, which turbo exceeds (a generated GEMM then ran above
"speed-of-light"). Here every core runs independent chains of vector FMAs (12: more than two pipes times the
FMA's latency need, and with the two constants within 16 registers) in a small C program, and the fastest of
several runs counts: what the cores do."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SOURCE = r'''
#include <omp.h>
#if defined(__AVX512F__)
typedef float vf __attribute__((vector_size(64)));
#elif defined(__AVX__) || defined(__ARM_NEON)
typedef float vf __attribute__((vector_size(32)));
#else
typedef float vf __attribute__((vector_size(16)));
#endif
/* FMAs done by all threads in `iters` rounds of CHAINS independent vector FMAs (x = x * m + c, with m and c
   run-time values: nothing to fold); their sum goes to *sink so that none is dropped */
#define EACH(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
double akg_fmas(long iters, float m0, float c0, float *sink) {
    double total = 0;
    #pragma omp parallel reduction(+:total)
    {
        const vf m = (vf){} + m0, c = (vf){} + c0;
#define INIT(a) vf x##a = (vf){} + (float)(a + omp_get_thread_num());
        EACH(INIT)
        for (long i = 0; i < iters; ++i) {
#define STEP(a) x##a = x##a * m + c;
            EACH(STEP)
        }
        vf s = (vf){};
#define ADD(a) s += x##a;
        EACH(ADD)
        float f = 0;
        for (int l = 0; l < (int)(sizeof(vf) / sizeof(float)); ++l) f += s[l];
        #pragma omp atomic
        *sink += f;
        total += (double)iters * 12 * (sizeof(vf) / sizeof(float));
    }
    return total;
}
'''


def fma_peak(quick: bool = False) -> float | None:
    """fp32 flops per second of all the cores this process may use; None without a C compiler."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="akg-fma-") as tmp:
        src, lib = Path(tmp) / "fma.c", Path(tmp) / "fma.so"
        src.write_text(SOURCE)
        cmd = [cc, "-O2", "-march=native", "-ffp-contract=fast", "-fopenmp", "-shared", "-fPIC", str(src), "-o",
               str(lib)]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            return None
        so = ctypes.CDLL(str(lib))
        so.akg_fmas.restype = ctypes.c_double
        so.akg_fmas.argtypes = [ctypes.c_long, ctypes.c_float, ctypes.c_float, ctypes.POINTER(ctypes.c_float)]
        sink = ctypes.c_float(0)
        iters = 2_000_000 if quick else 10_000_000
        so.akg_fmas(iters // 10, 0.999999, 1e-7, ctypes.byref(sink))  # warm-up: threads started, clocks up
        best = 0.0
        for _ in range(3 if quick else 7):
            t0 = time.perf_counter()
            fmas = so.akg_fmas(iters, 0.999999, 1e-7, ctypes.byref(sink))
            best = max(best, 2 * fmas / (time.perf_counter() - t0))
        return best
