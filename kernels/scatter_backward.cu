// scatter_backward: dE[col] += scale * val * dpre1[row] over the batch's kept entries, and
// db1 += the sum over rows of dpre1: the input layer's gradient (masked scatter).
// Deterministic without atomics: entries arrive grouped by column (col_order, col_ptr,
// col_ids from cut_batch), each column's run is reduced by one block in run order.
// Work split: one block per run; threads stride over K. Runs past the last distinct column
// are empty and skipped. db1: one thread per k summing the B rows in order.
#include "common.cuh"

extern "C" __global__ void scatter_backward_kernel(
        float* dE,                  // (N, K) accumulated
        const float* dpre1,         // (B, K)
        const float* vals,          // (nnz,)
        const unsigned char* keep,  // (nnz,)
        const int* entry_rows,      // (nnz,)
        const int* col_order,       // (nnz,)
        const int* col_ptr,         // (runs+1,)
        const int* col_ids,         // (runs,)
        float scale, int K) {
    int u = blockIdx.x;
    int start = col_ptr[u], end = col_ptr[u + 1];
    if (start == end) return;
    float* de = dE + (size_t)col_ids[u] * K;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = 0.0f;
        for (int t = start; t < end; t++) {
            int p = col_order[t];
            if (keep[p]) acc += vals[p] * scale * dpre1[(size_t)entry_rows[p] * K + k];
        }
        de[k] += acc;
    }
}

extern "C" __global__ void bias_backward_kernel(
        float* db,                  // (K,) accumulated
        const float* dpre,          // (B, K)
        int B, int K) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    float acc = 0.0f;
    for (int b = 0; b < B; b++) acc += dpre[(size_t)b * K + k];
    db[k] += acc;
}
