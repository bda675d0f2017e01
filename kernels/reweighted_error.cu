// reweighted_error: the implicit loss of each row from its dense logits out (B, N), and
// dout = d(row_weight[b] * row_loss[b]) / d out, tanh, weighting and error fused in one pass.
//   yhat = tanh(out); target 1, weight 1 at the row's observed columns; target 0, weight
//   weights[j] (the popularity weights c_j) elsewhere; row_loss[b] = sum_j w_j (yhat - t)^2.
// Work split: one block per row. Threads stride over all N columns treating each as
// unobserved, then (after a barrier) over the row's observed entries, correcting those; the
// row's loss is a fixed-order block sum. Padding rows have row_weight 0: their dout is 0.
#include "common.cuh"

extern "C" __global__ void reweighted_error_kernel(
        float* dout,                // (B, N) out
        float* row_loss,            // (B,) out
        const float* out,           // (B, N) logits
        const int* indptr,          // (B+1,)
        const int* cols,            // (nnz,)
        const float* weights,       // (N,)
        const float* row_weight,    // (B,)
        int N) {
    __shared__ float scratch[BLOCK];
    int b = blockIdx.x;
    float rw = row_weight[b];
    const float* o = out + (size_t)b * N;
    float* d = dout + (size_t)b * N;
    float loss = 0.0f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float y = tanhf(o[j]);
        loss += weights[j] * y * y;
        d[j] = rw * 2.0f * weights[j] * y * (1.0f - y * y);
    }
    __syncthreads();                // the observed corrections below overwrite those writes
    for (int p = indptr[b] + threadIdx.x; p < indptr[b + 1]; p += blockDim.x) {
        int j = cols[p];
        float y = tanhf(o[j]);
        loss += (y - 1.0f) * (y - 1.0f) - weights[j] * y * y;
        d[j] = rw * 2.0f * (y - 1.0f) * (1.0f - y * y);
    }
    loss = block_sum(loss, scratch);
    if (threadIdx.x == 0) row_loss[b] = loss;
}
