// A CPU stand-in for the CUDA device runtime, so that kernels/*.cu run under g++ where
// there is no GPU. Each CUDA thread of a block is an OS thread; __syncthreads is a barrier of
// the block's threads; __shared__ is a static local, shared by those threads (blocks run one
// after another); a warp shuffle is an exchange through a buffer between two warp barriers.
// It checks what the kernels compute and what the launchers pass them, not speed or the GPU's
// memory model: a race a real GPU would show may stay hidden here.
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using std::isnan;

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

inline std::barrier<>* emu_block_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_barriers;
inline float emu_warp_slots[1024];

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

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

inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    unsigned t = threadIdx.x, warp = t / 32;
    emu_warp_slots[t] = v;
    emu_warp_barriers[warp]->arrive_and_wait();
    float other = emu_warp_slots[warp * 32 + ((t % 32) ^ lane_mask)];
    emu_warp_barriers[warp]->arrive_and_wait();
    return other;
}

template <typename T>
T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value);
}

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
                blockIdx.x = b;
                kernel();
                block_barrier.arrive_and_wait();   // the block ends for every thread together
            }
        });
    }
    for (auto& thread : threads) thread.join();
}
