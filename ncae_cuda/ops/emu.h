// A CPU stand-in for the CUDA device runtime, so that kernels/*.cu run under g++ where
// there is no GPU. Each CUDA thread of a block is an OS thread; __syncthreads is a barrier of
// the block's threads; __shared__ is a static local, shared by those threads (blocks run one
// after another); a warp shuffle or ballot is an exchange through a buffer between two warp
// barriers. It checks what the kernels compute and what the launchers pass them, not speed or
// the GPU's memory model: a race a real GPU would show may stay hidden here, and since blocks
// run in order, the last block to arrive at a count is always the highest (or, with
// emu_set_descending(1), the lowest: a kernel's result must not depend on which).
#pragma once
#include <math.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
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
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

inline std::barrier<>* emu_block_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_barriers;
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

inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }

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
    emu_warp_barriers[warp]->arrive_and_wait();
    T other;
    std::memcpy(&other, &emu_warp_slots[warp * 32 + src], 4);
    emu_warp_barriers[warp]->arrive_and_wait();
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
    emu_warp_barriers[warp]->arrive_and_wait();
    for (unsigned lane = 0; lane < 32; lane++) mask |= emu_warp_slots[warp * 32 + lane] << lane;
    emu_warp_barriers[warp]->arrive_and_wait();
    return mask;
}

template <typename T>
T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value);
}

// The order blocks run in: ascending, or descending.
inline bool emu_descending = false;
extern "C" void emu_set_descending(int descending) { emu_descending = descending; }

// Runs `kernel` for every block of the grid, with `block` threads per block.
inline void emu_launch(int grid, int block, const std::function<void()>& kernel) {
    gridDim.x = grid;
    blockDim.x = block;
    std::barrier<> block_barrier(block);
    emu_block_barrier = &block_barrier;
    emu_warp_barriers.clear();
    for (int w = 0; w < block / 32; w++)
        emu_warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<std::thread> threads;
    for (int t = 0; t < block; t++) {
        threads.emplace_back([&, t] {
            threadIdx.x = t;
            for (int b = 0; b < grid; b++) {
                blockIdx.x = emu_descending ? grid - 1 - b : b;
                kernel();
                block_barrier.arrive_and_wait();   // the block ends for every thread together
            }
        });
    }
    for (auto& thread : threads) thread.join();
}
