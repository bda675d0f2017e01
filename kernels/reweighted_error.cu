// reweighted_error: the implicit loss of each row from the dense product z = a V^T (B, N), and
// dout = d(row_weight[b] * row_loss[b]) / d out, bias, tanh, weighting and error fused in one
// pass:  out = z + c;  yhat = tanh(out);  target 1, weight 1 at the row's observed columns
// (only its kept ones when `keep` is given: pre-training's corrupted target); target 0, weight
// weights[j] (the popularity weights c_j) elsewhere;  row_loss[b] = sum_j w_j (yhat - t)^2.
// Work split: one block per row (every row has N columns: the blocks' work differs only by
// the row's few observed entries). Threads stride over all N columns treating each as
// unobserved, then (after a barrier) over the row's observed entries, correcting those; the
// row's loss is a fixed-order block sum. Padding rows have row_weight 0: their dout is 0.
#include "common.cuh"

extern "C" __global__ void reweighted_error_kernel(
        float* __restrict__ dout,               // (B, N) out
        float* __restrict__ row_loss,           // (B,) out
        const float* __restrict__ z,            // (B, N): a V^T, without the bias
        const float* __restrict__ c,            // (N,)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const u8* __restrict__ keep,            // (nnz,) or null: every observed entry counts
        const float* __restrict__ weights,      // (N,)
        const float* __restrict__ row_weight,   // (B,)
        int N) {
    __shared__ float scratch[BLOCK];
    int b = blockIdx.x;
    float rw = row_weight[b];
    const float* zb = z + (size_t)b * N;
    float* d = dout + (size_t)b * N;
    float loss = 0.0f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float y = tanhf(zb[j] + c[j]);
        loss += weights[j] * y * y;
        d[j] = rw * 2.0f * weights[j] * y * (1.0f - y * y);
    }
    __syncthreads();                // the observed corrections below overwrite those writes
    for (int p = indptr[b] + threadIdx.x; p < indptr[b + 1]; p += blockDim.x) {
        if (keep && !keep[p]) continue;
        int j = cols[p];
        float y = tanhf(zb[j] + c[j]);
        loss += (y - 1.0f) * (y - 1.0f) - weights[j] * y * y;
        d[j] = rw * 2.0f * (y - 1.0f) * (1.0f - y * y);
    }
    loss = block_sum(loss, scratch);
    if (threadIdx.x == 0) row_loss[b] = loss;
}
