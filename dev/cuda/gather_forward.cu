// gather_forward, the versions tried, side by side (as llm.c's dev/cuda keeps them): each is
// checked against ncae_cuda/ops/reference.py, then timed on a GPU, by
//     python -m dev.cuda.run gather_forward [--shape ml10m|lastfm|delicious]
// until a GPU decides between them.
//   1. a block per batch row, threads striding over K, each summing its k over the row's
//      entries in order: the first draft. A step waits for its longest row, on one SM.
//   2. windows of C entries, a block each, one warp per slab of K, float4 loads and UNROLL
//      rows in flight; rows shared by windows summed from their pieces by the last window to
//      arrive; C the smallest power of two >= sqrt(2 x longest row): kernels/gather_forward.cu
//      on dev/cuda/run.py's first_window_sizes.
//   3. the same kernel, C chosen from the batch's entries and the SM count as well, so that
//      every SM gets a window, and kept >= sqrt(longest row) (ncae_cuda/plan.py:
//      window_sizes); the pieces read UNROLL at a time: kernels/gather_forward.cu, the one in
//      use (gather_forward_kernel).
#include "common.cuh"

extern "C" __global__ void gather_forward_kernel1(
        float* a1,                  // (B, K) out
        const int* indptr,          // (B+1,)
        const int* cols,            // (nnz,)
        const float* vals,          // (nnz,)
        const u8* keep,             // (nnz,)
        const float* E,             // (N, K)
        const float* b1,            // (K,)
        float scale, int K) {
    int b = blockIdx.x;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = b1[k];
        for (int p = indptr[b]; p < indptr[b + 1]; p++)
            if (keep[p]) acc += vals[p] * scale * E[(size_t)cols[p] * K + k];
        a1[(size_t)b * K + k] = tanhf(acc);
    }
}
