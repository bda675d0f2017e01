// Shared by every kernel: the dropout hash (the device twin of ncae_cuda/ops/common.py), the
// launch shape, and deterministic block reductions. NVRTC compiles these files at run time, so
// nothing here may include a host or standard-library header.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;

#define GOLDEN 0x9E3779B97F4A7C15ull   // splitmix64's increment
#define MIX1 0xBF58476D1CE4E5B9ull
#define MIX2 0x94D049BB133111EBull
#define KEEP_SHIFT 40                  // 64 - 24: the top 24 bits of the hash are compared

#define BLOCK 256                      // threads per block of every kernel here
#define WARP 32

// splitmix64's finalizer: bijective, every input bit reaches every output bit.
__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    return z ^ (z >> 31);
}

// Keep flag of one entry: a pure function of (seed, epoch) -> stream and the entry id.
__device__ __forceinline__ unsigned char dropout_kept(u64 stream, int entry_id, u32 threshold) {
    return (mix64(stream + (u64)entry_id * GOLDEN) >> KEEP_SHIFT) >= threshold;
}

// Sum of v over the block in a fixed tree order (the same result on every run).
// Every thread of the block must call it; `scratch` holds BLOCK values. Returns the sum to all.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
        __syncthreads();
    }
    T total = scratch[0];
    __syncthreads();   // scratch may be reused right after
    return total;
}
