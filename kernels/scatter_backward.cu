// scatter_backward: dE[col] += sum over the column's kept entries of scale * val * dpre1[row],
// the input layer's gradient (masked scatter). Its bias gradient is bias_backward's (dense.cu).
// Deterministic without float atomics: the entries come grouped by column (Batch.col_order),
// and each column's run is summed in that order.
// Work split: window reduction over the entries in column order (common.cuh): a block per
// window of C entries, its warps the slabs of K, UNROLL entries' dpre1 rows loaded together
// (common.cuh: add_rows).
#include "common.cuh"

extern "C" __global__ void scatter_backward_kernel(
        float* __restrict__ dE,                 // (N, K) accumulated
        float* pieces, int* arrivals,           // window scratch (common.cuh: Windows)
        const float* __restrict__ dpre1,        // (B, K)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const float* __restrict__ vals,         // (nnz,)
        const u8* __restrict__ keep,            // (nnz,)
        const int* __restrict__ entry_rows,     // (nnz,)
        const int* __restrict__ col_order,      // (nnz,)
        float scale,
        int B, int K,
        const int* __restrict__ window) {       // (1,) entries a window: the batch's
    Lanes l = lanes_of(K);
    Windows win = {*window, indptr[B], pieces, pieces_stride(K), arrivals};
    auto finish = [&](int j, const Acc& acc) { lanes_add_to(dE + (size_t)j * K, acc.x, l); };
    auto add = [&](Acc& acc, int, int s0, int s1) {
        add_rows(acc, s0, s1, dpre1, K, l, [&](int t, int& b, float& w) {
            int p = col_order[t];
            if (!keep[p]) return false;
            b = entry_rows[p];
            w = vals[p] * scale;
            return true;
        });
    };
    for (int w = blockIdx.x; w * win.C < win.nnz; w += gridDim.x)
        reduce_columns(w, win, col_order, cols, l, add, finish);
}
