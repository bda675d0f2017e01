// A CPU stand-in for the CUDA device runtime, so that kernels/*.cu run under g++ where
// there is no GPU. Each CUDA thread of a block is a fiber (a ucontext of its own stack) on the
// calling thread: it runs until it waits at a barrier (__syncthreads, or a warp's around a
// shuffle or ballot), and the next one of the block runs; a barrier lets its threads on when the
// last arrives. A warp runs as far as it can, up to the block's barrier, before the next warp
// does; the warps and lanes of odd blocks go in descending order, of even ones in ascending
// (the other way round with emu_set_descending(1)). So a missing __syncthreads shows: a warp
// reads what another warp has not written yet (in one of the two orders), or what it has
// already overwritten for the next round. A switch between fibers costs no system call to the
// scheduler, where a barrier of OS threads on a few cores costs a context switch a thread.
// __shared__ is a static local, shared by the block's threads (blocks run one after another); a
// warp shuffle or ballot is an exchange through a buffer between two warp barriers. It checks
// what the kernels compute and what the launchers pass them, not speed or the GPU's memory
// model: a fiber is never interrupted between barriers, so a plain += where an atomicAdd is
// needed never loses an update here, and since blocks run in order, a race between blocks
// stays hidden and the last block to arrive at a count is always the highest (or, with
// emu_set_descending(1), the lowest: a kernel's result must not depend on which).
// A fault in a thread (an access that the emulator's guard pages stop, a trap of the alignment
// check, a division by zero) ends its launch, not the process: emu_launch returns the signal and
// emu_last_fault says where, for the launching code to raise.
#pragma once
// (a fiber's _longjmp goes to another stack, which _FORTIFY_SOURCE's check takes for a bug)
#undef _FORTIFY_SOURCE
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

using std::isnan;
using std::max;
using std::min;

struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline emu_dim3 threadIdx, blockIdx, blockDim, gridDim;   // threadIdx: the running fiber's

// The fibers of a block, one a CUDA thread, and the context of the launch that runs them.
// A fiber starts from its ucontext (makecontext: its own stack) and then switches by
// _setjmp/_longjmp, which unlike swapcontext save no signal mask: no system call a switch.
struct emu_fiber {
    ucontext_t start;
    jmp_buf resume;
    char* stack = nullptr;
    bool started = false, done = false;
    bool at_barrier = false;           // waits at the block's barrier ...
    unsigned barrier_generation = 0;   // ... until it passes this generation
};
inline std::vector<emu_fiber> emu_fibers;
inline jmp_buf emu_scheduler;
inline const std::function<void()>* emu_kernel = nullptr;
constexpr size_t EMU_STACK = 256 * 1024;   // a CUDA thread's locals are small; pages untouched
                                           // are never committed

// Back to the scheduler, which runs the block's next fiber.
inline void emu_yield() {
    if (!_setjmp(emu_fibers[threadIdx.x].resume)) _longjmp(emu_scheduler, 1);
}

// A barrier of `expected` fibers: each waits (yields) until the last arrives.
struct emu_barrier {
    unsigned expected = 0, arrived = 0, generation = 0;
    void arrive_and_wait() {
        unsigned mine = generation;
        if (++arrived == expected) {
            arrived = 0;
            generation++;
            return;
        }
        while (generation == mine) emu_yield();
    }
};
inline emu_barrier emu_block_barrier;
inline emu_barrier emu_warp_barriers[1024 / 32];
inline unsigned emu_warp_slots[1024];

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__

inline void __threadfence() {}      // blocks run one after another: all writes are seen
template <typename T>
T __ldcg(const T* p) { return *p; }
inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }

// The block's barrier, marked on the fiber so the scheduler leaves it until the barrier opens.
inline void emu_block_wait() {
    emu_fiber& f = emu_fibers[threadIdx.x];
    f.at_barrier = true;
    f.barrier_generation = emu_block_barrier.generation;
    emu_block_barrier.arrive_and_wait();
    f.at_barrier = false;
}

inline void __syncthreads() { emu_block_wait(); }

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// Every lane of the calling thread's warp puts a 4-byte value in; each gets lane src's back.
template <typename T>
T emu_exchange(T v, unsigned src) {
    static_assert(sizeof(T) == 4);
    unsigned t = threadIdx.x, warp = t / 32;
    std::memcpy(&emu_warp_slots[t], &v, 4);
    emu_warp_barriers[warp].arrive_and_wait();
    T other;
    std::memcpy(&other, &emu_warp_slots[warp * 32 + src], 4);
    emu_warp_barriers[warp].arrive_and_wait();
    return other;
}

template <typename T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    return emu_exchange(v, (threadIdx.x % 32) ^ lane_mask);
}

template <typename T>
T __shfl_sync(unsigned, T v, int src) { return emu_exchange(v, src); }

template <typename T>
T __shfl_up_sync(unsigned, T v, unsigned delta) {
    unsigned lane = threadIdx.x % 32;
    return emu_exchange(v, lane >= delta ? lane - delta : lane);
}

inline unsigned __ballot_sync(unsigned, int predicate) {
    unsigned t = threadIdx.x, warp = t / 32, mask = 0;
    emu_warp_slots[t] = predicate != 0;
    emu_warp_barriers[warp].arrive_and_wait();
    for (unsigned lane = 0; lane < 32; lane++) mask |= emu_warp_slots[warp * 32 + lane] << lane;
    emu_warp_barriers[warp].arrive_and_wait();
    return mask;
}

template <typename T>
T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value);
}

// The order blocks run in: ascending, or descending.
inline bool emu_descending = false;
extern "C" void emu_set_descending(int descending) { emu_descending = descending; }

inline void emu_fiber_main() {
    (*emu_kernel)();
    emu_block_wait();                         // the block ends for every thread together
    emu_fibers[threadIdx.x].done = true;
    _longjmp(emu_scheduler, 1);
}

// Runs fiber t until it waits or ends.
inline void emu_resume(int t) {
    emu_fiber& f = emu_fibers[t];
    threadIdx.x = t;
    if (!_setjmp(emu_scheduler)) {
        if (f.started) _longjmp(f.resume, 1);
        f.started = true;
        setcontext(&f.start);
    }
}

// Whether fiber t can go on: not ended, nor waiting at the block's barrier while it is shut.
inline bool emu_runnable(int t) {
    const emu_fiber& f = emu_fibers[t];
    return !f.done && !(f.at_barrier && f.barrier_generation == emu_block_barrier.generation);
}

// The fault that ended the last launch on this thread: signal 0 where none did.
struct emu_fault_record {
    int signal;             // SIGSEGV, SIGBUS (an access), SIGILL (a trap), SIGFPE
    int block, thread;
    int write;              // 1: the access wrote, 0: it read, -1: not known
    uintptr_t address;      // the address accessed (of the instruction, for a trap)
};
inline thread_local emu_fault_record emu_fault;
inline thread_local bool emu_launching = false;
inline thread_local sigjmp_buf emu_fault_jump;
constexpr int EMU_FAULTS[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
inline struct sigaction emu_previous[std::size(EMU_FAULTS)];
extern "C" const emu_fault_record* emu_last_fault() { return &emu_fault; }

// A fault's handler: in a launch on this thread, back to emu_launch with the fault recorded;
// elsewhere (another thread's fault), the handler that was there before takes it, as the
// faulting instruction runs again.
inline void emu_on_fault(int signal, siginfo_t* info, void* context) {
    if (!emu_launching) {
        for (size_t i = 0; i < std::size(EMU_FAULTS); i++)
            if (EMU_FAULTS[i] == signal) sigaction(signal, &emu_previous[i], nullptr);
        return;
    }
    int write = -1;
#if defined(__x86_64__)
    if (signal == SIGSEGV)      // the page fault's error code: bit 1 set for a write
        write = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
    emu_fault = {signal, (int)blockIdx.x, (int)threadIdx.x, write, (uintptr_t)info->si_addr};
    siglongjmp(emu_fault_jump, 1);
}

// While it lives, faults are emu_on_fault's (the process's own handlers before and after).
struct emu_fault_trap {
    emu_fault_trap() {
        struct sigaction action = {};
        action.sa_sigaction = emu_on_fault;
        action.sa_flags = SA_SIGINFO;
        sigemptyset(&action.sa_mask);
        for (size_t i = 0; i < std::size(EMU_FAULTS); i++)
            sigaction(EMU_FAULTS[i], &action, &emu_previous[i]);
        emu_launching = true;
    }
    ~emu_fault_trap() {
        emu_launching = false;
        for (size_t i = 0; i < std::size(EMU_FAULTS); i++)
            sigaction(EMU_FAULTS[i], &emu_previous[i], nullptr);
    }
};

// Runs `kernel` for every block of the grid, with `block` threads per block: warp by warp (in
// the block's order), each warp's fibers in turn until every one has ended or waits at the
// block's barrier, until all have ended. Returns 0, or the signal of a thread's fault, which
// ends the launch there (emu_last_fault says where); the next launch starts every fiber anew.
inline int emu_launch(int grid, int block, const std::function<void()>& kernel) {
    emu_fault = {};
    emu_fault_trap trap;
    if (sigsetjmp(emu_fault_jump, 1)) return emu_fault.signal;
    gridDim.x = grid;
    blockDim.x = block;
    emu_kernel = &kernel;
    emu_block_barrier = {(unsigned)block};
    for (int w = 0; w < block / 32; w++) emu_warp_barriers[w] = {32};
    if (emu_fibers.size() < (size_t)block) emu_fibers.resize(block);
    for (int b = 0; b < grid; b++) {
        blockIdx.x = emu_descending ? grid - 1 - b : b;
        for (int t = 0; t < block; t++) {
            emu_fiber& f = emu_fibers[t];
            if (!f.stack) f.stack = static_cast<char*>(malloc(EMU_STACK));
            getcontext(&f.start);
            f.start.uc_stack.ss_sp = f.stack;
            f.start.uc_stack.ss_size = EMU_STACK;
            f.start.uc_link = nullptr;          // emu_fiber_main never returns
            f.started = f.done = f.at_barrier = false;
            makecontext(&f.start, emu_fiber_main, 0);
        }
        bool descending = (blockIdx.x % 2 == 1) != emu_descending;
        auto nth = [&](int i, int n) { return descending ? n - 1 - i : i; };
        int warps = (block + 31) / 32;
        for (bool running = true; running;) {
            running = false;
            for (int i = 0; i < warps; i++) {
                int w = nth(i, warps), lanes = min(32, block - 32 * w);
                for (bool ran = true; ran;) {
                    ran = false;
                    for (int lane = 0; lane < lanes; lane++) {
                        int t = 32 * w + nth(lane, lanes);
                        if (!emu_runnable(t)) continue;
                        emu_resume(t);
                        ran = true;
                    }
                }
            }
            for (int t = 0; t < block; t++) running |= !emu_fibers[t].done;
        }
    }
    return 0;
}
