// gather_forward: a1 (B, K) = tanh(b1 + sum over the row's entries of keep * scale * val *
// E[col]), the input layer of the autoencoder with tanh fused. E (N, K) is row-major, so each
// entry's embedding row is one contiguous read. Without b1 (null) a1 is the sum alone: a column
// shard's part of the pre-activation, which the shards add up before the bias and tanh.
// Work split: window reduction over the batch's entries in row order (common.cuh): a block per
// window of C entries, its warps the slabs of K, UNROLL entries' E rows loaded together
// (common.cuh: add_rows). A row with no entries (padding) gets tanh(b1) (or 0).
#include "common.cuh"

extern "C" __global__ void gather_forward_kernel(
        float* __restrict__ a1,                 // (B, K) out
        float* pieces, int* arrivals,           // window scratch (common.cuh: Windows)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const float* __restrict__ vals,         // (nnz,)
        const u8* __restrict__ keep,            // (nnz,)
        const int* __restrict__ entry_rows,     // (nnz,)
        const float* __restrict__ E,            // (N, K)
        const float* __restrict__ b1,           // (K,), or null: the sum alone
        float scale,
        int B, int K,
        const int* __restrict__ window) {       // (1,) entries a window: the batch's
    Lanes l = lanes_of(K);
    Windows win = {*window, indptr[B], pieces, pieces_stride(K), arrivals};
    auto finish = [&](int b, const Acc& acc) {
        float y[LANE_FLOATS];
        if (b1 != nullptr) {
            lanes_load(y, b1, l);
            for (int i = 0; i < LANE_FLOATS; i++) y[i] = tanhf(y[i] + acc.x[i]);
        } else {
            for (int i = 0; i < LANE_FLOATS; i++) y[i] = acc.x[i];
        }
        lanes_store(a1 + (size_t)b * K, y, l);
    };
    auto add = [&](Acc& acc, int, int s0, int s1) {
        add_rows(acc, s0, s1, E, K, l, [&](int t, int& col, float& w) {
            if (!keep[t]) return false;             // a dropped entry's row is not read
            col = cols[t];
            w = vals[t] * scale;
            return true;
        });
    };
    for (int b = blockIdx.x; b < B; b += gridDim.x)
        if (indptr[b] == indptr[b + 1]) finish(b, acc_zero());
    for (int w = blockIdx.x; w * win.C < win.nnz; w += gridDim.x)
        reduce_rows(w, win, indptr, entry_rows, l, add, finish);
}
