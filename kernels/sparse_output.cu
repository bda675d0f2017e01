// sparse_output_forward / sparse_output_backward: the explicit-feedback output layer,
// evaluated only at the observed entries of the batch.
//   forward:  yhat_p = s * tanh(V[col_p] . a[row_p] + c[col_p]) + m_off
//   backward: row_loss[b] = sum over the row's entries of w_p/|K_b| (yhat_p - x_p)^2,
//             w_p = alpha (input dropped) or beta (kept), |K_b| = the row's entry count;
//             g_p = row_weight[b] * d row_loss[b] / d out_p;
//             da[b] += g_p V[col_p];  dV[col_p] += g_p a[b];  dc[col_p] += g_p.
// The backward runs twice over the batch, as the CPU mirror does: by row (loss, g, da) and by
// column (dV, dc, reduced per column's run in col_order: deterministic, no atomics).
#include "common.cuh"

// Work split: one block per batch row; each warp takes every (BLOCK/WARP)-th entry of the row,
// its lanes stride over K and the dot product is summed across the warp.
extern "C" __global__ void sparse_output_forward_kernel(
        float* yhat,                // (nnz,) out
        const float* a,             // (B, K)
        const float* V,             // (N, K)
        const float* c,             // (N,)
        const int* indptr,          // (B+1,)
        const int* cols,            // (nnz,)
        float s, float m_off, int K) {
    int b = blockIdx.x;
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const float* ab = a + (size_t)b * K;
    for (int p = indptr[b] + warp; p < indptr[b + 1]; p += BLOCK / WARP) {
        const float* v = V + (size_t)cols[p] * K;
        float dot = 0.0f;
        for (int k = lane; k < K; k += WARP) dot += v[k] * ab[k];
        for (int offset = WARP / 2; offset > 0; offset /= 2)
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        if (lane == 0) yhat[p] = s * tanhf(dot + c[cols[p]]) + m_off;
    }
}

// By row. Work split: one block per batch row; threads stride over the row's entries for the
// loss and g, then over K for da.
extern "C" __global__ void sparse_output_backward_rows_kernel(
        float* da,                  // (B, K) accumulated
        float* row_loss,            // (B,) out
        float* g,                   // (nnz,) out: d loss / d out at each entry
        const float* V,             // (N, K)
        const float* yhat,          // (nnz,)
        const int* indptr,          // (B+1,)
        const int* cols,            // (nnz,)
        const float* vals,          // (nnz,)
        const unsigned char* keep,  // (nnz,)
        const float* row_weight,    // (B,)
        float alpha, float beta, float s, float m_off, int K) {
    __shared__ float scratch[BLOCK];
    int b = blockIdx.x;
    int start = indptr[b], end = indptr[b + 1];
    float n_obs = (float)(end - start);
    float loss = 0.0f;
    for (int p = start + threadIdx.x; p < end; p += blockDim.x) {
        float w = (keep[p] ? beta : alpha) / n_obs;
        float err = yhat[p] - vals[p];
        float t = (yhat[p] - m_off) / s;                         // tanh(out)
        loss += w * err * err;
        g[p] = row_weight[b] * w * 2.0f * err * s * (1.0f - t * t);
    }
    loss = block_sum(loss, scratch);                             // also orders g's writes
    if (threadIdx.x == 0) row_loss[b] = loss;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = 0.0f;
        for (int p = start; p < end; p++) acc += g[p] * V[(size_t)cols[p] * K + k];
        da[(size_t)b * K + k] += acc;
    }
}

// By column. Work split: one block per column run; threads stride over K; thread 0 sums dc.
extern "C" __global__ void sparse_output_backward_cols_kernel(
        float* dV,                  // (N, K) accumulated
        float* dc,                  // (N,) accumulated
        const float* g,             // (nnz,)
        const float* a,             // (B, K)
        const int* entry_rows,      // (nnz,)
        const int* col_order,       // (nnz,)
        const int* col_ptr,         // (runs+1,)
        const int* col_ids,         // (runs,)
        int K) {
    int u = blockIdx.x;
    int start = col_ptr[u], end = col_ptr[u + 1];
    if (start == end) return;
    int j = col_ids[u];
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = 0.0f;
        for (int t = start; t < end; t++) {
            int p = col_order[t];
            acc += g[p] * a[(size_t)entry_rows[p] * K + k];
        }
        dV[(size_t)j * K + k] += acc;
    }
    if (threadIdx.x == 0) {
        float acc = 0.0f;
        for (int t = start; t < end; t++) acc += g[col_order[t]];
        dc[j] += acc;
    }
}
