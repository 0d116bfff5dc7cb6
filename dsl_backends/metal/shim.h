// akg's Metal emulation shim: compiles MSL kernels as C++ and runs them on the CPU. Installed as the
// header <metal_stdlib>, so the generated MSL compiles unchanged. Each threadgroup runs as fibers
// (ucontext) on one OS thread, so barriers and SIMD shuffles have their Metal meaning; threadgroups run
// in parallel across OpenMP threads. Slow: for checking, not speed.
#pragma once
#include <setjmp.h>
#include <ucontext.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef _Float16 half;
struct uint3 { uint x, y, z; };

#define kernel
#define device
#define constant const
#define thread
#define threadgroup

namespace mem_flags { enum { mem_none = 0, mem_device = 1, mem_threadgroup = 2 }; }

template <typename T, typename U> inline T as_type(U u) {
    static_assert(sizeof(T) == sizeof(U), "as_type needs equal sizes");
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
}

namespace metal {
using std::fabs; using std::floor; using std::ceil; using std::trunc; using std::rint; using std::fmax;
using std::fmin; using std::sqrt; using std::exp; using std::log; using std::sin; using std::cos; using std::tanh;
using std::pow; using std::atan2; using std::isnan;
namespace precise {
using std::sqrt; using std::exp; using std::log; using std::sin; using std::cos; using std::tanh; using std::pow;
using std::atan2;
}  // namespace precise
}  // namespace metal

namespace akg_emu {
// Threads of a group are fibers: entered once through ucontext, then switched with _setjmp/_longjmp,
// which (unlike swapcontext) make no system call per switch.
constexpr size_t STACK = 64 * 1024;
struct Group {
    unsigned n = 0, cur = 0;
    std::vector<ucontext_t> ctx;
    struct Jmp { jmp_buf b; };
    std::vector<Jmp> jmp;
    std::vector<char> state;  // 0 not started, 1 waiting at a barrier, 2 done
    std::vector<std::unique_ptr<char[]>> stacks;
    ucontext_t sched_ctx;
    jmp_buf sched;
    const std::function<void(unsigned)>* body = nullptr;
    alignas(16) unsigned char slots[1024 * 8];  // one 8-byte slot per thread for shuffles
};
inline Group& group() { static thread_local Group g; return g; }

inline void barrier() {  // back to the scheduler; resumed once every thread of the group got here
    Group& g = group();
    g.state[g.cur] = 1;
    if (!_setjmp(g.jmp[g.cur].b)) _longjmp(g.sched, 1);
}

inline void fiber_main(int lid) {
    Group& g = group();
    (*g.body)((unsigned)lid);
    g.state[lid] = 2;
    _longjmp(g.sched, 1);  // never returns: the scheduler's frame is the one to go back to
}

inline void run_group(unsigned n, const std::function<void(unsigned)>& body) {
    Group& g = group();
    if (g.stacks.size() < n) g.stacks.resize(n);
    for (unsigned i = 0; i < n; ++i) if (!g.stacks[i]) g.stacks[i].reset(new char[STACK]);
    g.ctx.resize(n);
    g.jmp.resize(n);
    g.state.assign(n, 0);
    g.n = n;
    g.body = &body;
    // volatile: these live across _setjmp/_longjmp
    for (volatile bool any = true; any;) {  // each pass runs every live thread to its next barrier or its end
        any = false;
        for (volatile unsigned i = 0; i < n; ++i) {
            if (g.state[i] == 2) continue;
            any = true;
            g.cur = i;
            if (_setjmp(g.sched)) continue;  // the fiber came back (barrier or end)
            if (g.state[i] == 0) {
                getcontext(&g.ctx[i]);
                g.ctx[i].uc_stack.ss_sp = g.stacks[i].get();
                g.ctx[i].uc_stack.ss_size = STACK;
                g.ctx[i].uc_link = nullptr;
                makecontext(&g.ctx[i], (void (*)())fiber_main, 1, (int)i);
                setcontext(&g.ctx[i]);
            }
            _longjmp(g.jmp[i].b, 1);
        }
    }
}

inline void grid(unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                 const std::function<void(uint3, unsigned)>& fn) {
    const long total = (long)gx * gy * gz;
    #pragma omp parallel for schedule(dynamic)
    for (long t = 0; t < total; ++t) {
        const uint3 tg{(uint)(t % gx), (uint)((t / gx) % gy), (uint)(t / ((long)gx * gy))};
        std::function<void(unsigned)> body = [&](unsigned lid) { fn(tg, lid); };
        run_group(threads, body);
    }
}
}  // namespace akg_emu

inline void threadgroup_barrier(int) { akg_emu::barrier(); }

template <typename T> inline T simd_shuffle_down(T v, ushort delta) {
    akg_emu::Group& g = akg_emu::group();
    const unsigned lid = g.cur;
    std::memcpy(g.slots + lid * 8, &v, sizeof(T));
    akg_emu::barrier();
    T r = v;  // lanes past the end of the simdgroup keep their own value
    if (lid % 32 + delta < 32 && lid + delta < g.n) std::memcpy(&r, g.slots + (lid + delta) * 8, sizeof(T));
    akg_emu::barrier();
    return r;
}

// Simdgroup matrices. In Metal the 32 threads of a simdgroup hold one matrix between them and every
// operation is collective; here each thread holds the whole matrix and does the whole operation, with the
// same results and the same memory effects (a store writes identical values once per thread).
template <typename T, int C, int R> struct simdgroup_matrix { T e[R][C]; };
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <typename T, int C, int R> inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
    simdgroup_matrix<T, C, R> m;
    for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) m.e[r][c] = v;
    return m;
}
template <typename T, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R>& d, const T* src, unsigned long elements_per_row = C) {
    for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) d.e[r][c] = src[r * elements_per_row + c];
}
template <typename T, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R>& a, T* dst, unsigned long elements_per_row = C) {
    for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) dst[r * elements_per_row + c] = a.e[r][c];
}
template <typename T, int C, int R, int K>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, C, R>& d, const simdgroup_matrix<T, K, R>& a,
                                          const simdgroup_matrix<T, C, K>& b, const simdgroup_matrix<T, C, R>& c) {
    simdgroup_matrix<T, C, R> t;  // d may be c
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < C; ++j) {
            T s = c.e[r][j];
            for (int q = 0; q < K; ++q) s += a.e[r][q] * b.e[q][j];
            t.e[r][j] = s;
        }
    d = t;
}
