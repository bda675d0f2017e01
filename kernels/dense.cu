// The elementwise and column-sum parts of the dense layers, around cuBLAS's products:
//   bias_tanh:     a = tanh(a + b), the activation of a dense hidden layer (a holds a W^T);
//   bias_backward: db += the column sums of dpre; given the layer's output a, dpre = da *
//                  (1 - a^2) is formed (and written) first: a tanh layer's backward. Without a,
//                  dpre is summed as it is (the implicit output's dc from dout).
#include "common.cuh"

// Work split: a grid-stride loop over the B*K elements.
extern "C" __global__ void bias_tanh_kernel(
        float* __restrict__ a,                  // (B, K) in place
        const float* __restrict__ b,            // (K,)
        int B, int K) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (long long)B * K;
         i += (long long)gridDim.x * blockDim.x)
        a[i] = tanhf(a[i] + b[i % K]);
}

// Work split: a block per WARP columns; its BLOCK/WARP warps take every (BLOCK/WARP)-th row,
// each lane one column (coalesced reads of a row), then the warps' partial sums are added in
// warp order: the same sums on every run.
extern "C" __global__ void bias_backward_kernel(
        float* __restrict__ db,                 // (K,) accumulated
        float* __restrict__ dpre,               // (B, K) written where a is given, else read
        const float* __restrict__ da,           // (B, K) or null
        const float* __restrict__ a,            // (B, K) or null
        int B, int K) {
    __shared__ float partial[BLOCK / WARP][WARP];
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    int k = blockIdx.x * WARP + lane;
    float sum = 0.0f;
    if (k < K) {
        for (int b = warp; b < B; b += BLOCK / WARP) {
            size_t i = (size_t)b * K + k;
            float d = a ? da[i] * (1.0f - a[i] * a[i]) : dpre[i];
            if (a) dpre[i] = d;
            sum += d;
        }
    }
    partial[warp][lane] = sum;
    __syncthreads();
    if (warp == 0 && k < K) {
        float total = 0.0f;
        for (int w = 0; w < BLOCK / WARP; w++) total += partial[w][lane];
        db[k] += total;
    }
}
