// multinomial_error: the implicit loss of each row as a multinomial likelihood over the items
// (Mult-VAE's, Liang et al., WWW 2018) from the dense product z = a V^T (B, N), and
// dout = d(row_weight[b] * row_loss[b]) / d out:  out = z + c;  pi = softmax(out) over the N
// columns;  x_j = 1 at the row's observed columns (only its kept ones when `keep` is given:
// pre-training's corrupted target), 0 elsewhere;  n = sum_j x_j;
// row_loss[b] = -sum_j x_j log pi_j = n * logsumexp(out) - sum_j x_j out_j;  dout = n pi - x.
// Work split: one block per row, like reweighted_error: one pass over the row for its largest
// logit and its sum of exp(out - largest) (no exp overflows), a second writes dout for every
// column; after a barrier the row's observed entries subtract their x_j. Sums are in fixed
// order. A row with no observed entry (padding, or all of it dropped) has n = 0: loss 0, dout 0.
#include "common.cuh"

extern "C" __global__ void multinomial_error_kernel(
        float* __restrict__ dout,               // (B, N) out
        float* __restrict__ row_loss,           // (B,) out
        const float* __restrict__ z,            // (B, N): a V^T, without the bias
        const float* __restrict__ c,            // (N,)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const u8* __restrict__ keep,            // (nnz,) or null: every observed entry counts
        const float* __restrict__ row_weight,   // (B,)
        int N) {
    __shared__ float scratch[BLOCK];
    int b = blockIdx.x;
    float rw = row_weight[b];
    const float* zb = z + (size_t)b * N;
    float* d = dout + (size_t)b * N;
    float n = 0.0f, observed = 0.0f;          // this thread's share of n and of sum_j x_j out_j
    for (int p = indptr[b] + threadIdx.x; p < indptr[b + 1]; p += blockDim.x) {
        if (keep && !keep[p]) continue;
        int j = cols[p];
        n += 1.0f;
        observed += zb[j] + c[j];
    }
    // online softmax (as llm.c's): one read of the row gives this thread's largest logit and
    // its sum of exp(out - largest), rescaled whenever a larger one comes
    float top = __int_as_float(0xff800000), sum = 0.0f;        // -inf, 0
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float o = zb[j] + c[j];
        if (o > top) {
            sum = sum * expf(top - o) + 1.0f;
            top = o;
        } else {
            sum += expf(o - top);
        }
    }
    float row_top = block_max(top, scratch);
    sum = block_sum(sum * expf(top - row_top), scratch);   // a thread with no column: 0
    n = block_sum(n, scratch);
    observed = block_sum(observed, scratch);
    float lse = row_top + logf(sum);
    for (int j = threadIdx.x; j < N; j += blockDim.x) d[j] = rw * n * expf(zb[j] + c[j] - lse);
    __syncthreads();                // the observed corrections below read and overwrite those
    for (int p = indptr[b] + threadIdx.x; p < indptr[b + 1]; p += blockDim.x) {
        if (keep && !keep[p]) continue;
        d[cols[p]] -= rw;
    }
    if (threadIdx.x == 0) row_loss[b] = n * lse - observed;
}
