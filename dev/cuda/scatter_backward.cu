// scatter_backward, the versions tried, side by side (as llm.c's dev/cuda keeps them): each is
// checked against ncae_cuda/ops/reference.py, then timed on a GPU, by
//     python -m dev.cuda.run scatter_backward [--shape ml10m|lastfm|delicious]
// until a GPU decides between them.
//   1. a block per column's run (runs from col_order: run_ptr, run_cols), threads striding over
//      K, each summing its k over the run's entries in order: the first draft. Runs hold 1 to
//      B entries: most blocks have almost nothing to do while a few carry B entries.
//   2. windows of C >= B entries of col_order, a block each, one warp per slab of K; runs shared
//      by two windows summed from their pieces by the later to arrive:
//      kernels/scatter_backward.cu on dev/cuda/run.py's first_window_sizes.
//   3. the same kernel, C chosen from the batch's entries and the SM count as well, so that
//      every SM gets a window, and allowed below B (a run then spans up to WARP windows either
//      side, found by probing window edges; ncae_cuda/plan.py: window_sizes): the one in use
//      (scatter_backward_kernel).
#include "common.cuh"

extern "C" __global__ void scatter_backward_kernel1(
        float* dE,                  // (N, K) accumulated
        const float* dpre1,         // (B, K)
        const float* vals,          // (nnz,)
        const u8* keep,             // (nnz,)
        const int* entry_rows,      // (nnz,)
        const int* col_order,       // (nnz,)
        const int* run_ptr,         // (runs+1,)
        const int* run_cols,        // (runs,)
        float scale, int K) {
    int u = blockIdx.x;
    float* de = dE + (size_t)run_cols[u] * K;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = 0.0f;
        for (int t = run_ptr[u]; t < run_ptr[u + 1]; t++) {
            int p = col_order[t];
            if (keep[p]) acc += vals[p] * scale * dpre1[(size_t)entry_rows[p] * K + k];
        }
        de[k] += acc;
    }
}
