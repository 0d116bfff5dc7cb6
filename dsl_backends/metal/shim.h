// akg's Metal emulation shim: compiles MSL kernels as C++ and runs them on the CPU. Installed as the
// header <metal_stdlib>, so the generated MSL compiles unchanged. Each threadgroup runs as fibers
// (ucontext) on one OS thread, so barriers and SIMD shuffles have their Metal meaning; threadgroups run
// in parallel across OpenMP threads. Slow: for checking, not speed.
#pragma once
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
constexpr size_t STACK = 64 * 1024;
struct Group {
    unsigned n = 0, cur = 0;
    std::vector<ucontext_t> ctx;
    std::vector<char> done;
    std::vector<std::unique_ptr<char[]>> stacks;
    ucontext_t sched;
    const std::function<void(unsigned)>* body = nullptr;
    alignas(16) unsigned char slots[1024 * 8];  // one 8-byte slot per thread for shuffles
};
inline Group& group() { static thread_local Group g; return g; }

inline void barrier() {  // back to the scheduler; resumed once every thread of the group got here
    Group& g = group();
    swapcontext(&g.ctx[g.cur], &g.sched);
}

inline void fiber_main(int lid) {
    Group& g = group();
    (*g.body)((unsigned)lid);
    g.done[lid] = 1;  // returning switches to uc_link, the scheduler
}

inline void run_group(unsigned n, const std::function<void(unsigned)>& body) {
    Group& g = group();
    if (g.stacks.size() < n) g.stacks.resize(n);
    for (unsigned i = 0; i < n; ++i) if (!g.stacks[i]) g.stacks[i].reset(new char[STACK]);
    g.ctx.resize(n);
    g.done.assign(n, 0);
    g.n = n;
    g.body = &body;
    for (unsigned i = 0; i < n; ++i) {
        getcontext(&g.ctx[i]);
        g.ctx[i].uc_stack.ss_sp = g.stacks[i].get();
        g.ctx[i].uc_stack.ss_size = STACK;
        g.ctx[i].uc_link = &g.sched;
        makecontext(&g.ctx[i], (void (*)())fiber_main, 1, (int)i);
    }
    for (bool any = true; any;) {  // each pass runs every live thread to its next barrier or its end
        any = false;
        for (unsigned i = 0; i < n; ++i) {
            if (g.done[i]) continue;
            any = true;
            g.cur = i;
            swapcontext(&g.sched, &g.ctx[i]);
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
