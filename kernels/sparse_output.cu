// sparse_output_forward / sparse_output_backward: the explicit-feedback output layer, evaluated
// only at the observed entries of the batch.
//   forward:  yhat_p = s * tanh(out_p) + m_off, out_p = V[col_p] . a[row_p] + c[col_p]
//             (identity: yhat_p = out_p + m_off)
//   backward: row_loss[b] = sum over the row's entries of w_p/|K_b|^row_norm (yhat_p - x_p)^2,
//             w_p = alpha (input dropped) or beta (kept), |K_b| = the row's entry count in the
//             whole training matrix (row_entries: a column shard holds part of the row);
//             g_p = row_weight[b] * d row_loss[b] / d out_p   (tanh kept, not rebuilt from yhat);
//             da[b] = sum_p g_p V[col_p];  dV[col_p] += g_p a[b];  dc[col_p] += g_p.
// The backward recomputes the forward, so each V row is read once a step: the rows kernel takes
// a row's entries UNROLL at a time, loads their V rows, forms the dot products (each warp its
// slab, then the warps' partial sums in slab order), and adds g_p V[col_p] to da from the same
// registers. The columns kernel then sums dV, dc per column's run in col_order order.
// Work split: window reduction (common.cuh), a block per window, its warps the slabs of K.
#include "common.cuh"

// dot[u] = sum over k of v[u][k] a[k], from each thread's share of v[u] and a: every warp's
// partial sum by shuffles, then the warps' partials in slab order. Every thread gets the sums.
__device__ void block_dots(float* dot, const float (*v)[LANE_FLOATS], const float* a) {
    __shared__ float partial[1024 / WARP][UNROLL];
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    for (int u = 0; u < UNROLL; u++) {
        float p = 0.0f;
        for (int i = 0; i < LANE_FLOATS; i++) p += v[u][i] * a[i];
        for (int offset = WARP / 2; offset > 0; offset /= 2)
            p += __shfl_xor_sync(FULL_MASK, p, offset);
        if (lane == 0) partial[warp][u] = p;
    }
    __syncthreads();
    for (int u = 0; u < UNROLL; u++) {
        dot[u] = 0.0f;
        for (int s = 0; s < (int)blockDim.x / WARP; s++) dot[u] += partial[s][u];
    }
    __syncthreads();    // partial is reused by the next call
}

// For row b's entries [s0, s1), UNROLL at a time: their columns (col[u], -1 past s1), V rows
// (v[u], this thread's share) and dot products with a[b] (dot[u]), handed to visit(t, col, v,
// dot). Every thread of the block must call it (block_dots synchronises).
template <class Visit>
__device__ void row_dots(int b, int s0, int s1, const float* __restrict__ a,
                         const float* __restrict__ V, const int* __restrict__ cols, int K,
                         Lanes l, Visit visit) {
    float ab[LANE_FLOATS], v[UNROLL][LANE_FLOATS], dot[UNROLL];
    int col[UNROLL];
    lanes_load(ab, a + (size_t)b * K, l);
    for (int t = s0; t < s1; t += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) col[u] = t + u < s1 ? cols[t + u] : -1;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (col[u] >= 0) lanes_load(v[u], V + (size_t)col[u] * K, l);
            else for (int i = 0; i < LANE_FLOATS; i++) v[u][i] = 0.0f;
        }
        block_dots(dot, v, ab);
        visit(t, col, v, dot);
    }
}

// Prediction: yhat at every entry. Windows over the entries in row order; no sums to share.
extern "C" __global__ void sparse_output_forward_kernel(
        float* __restrict__ yhat,               // (nnz,) out
        const float* __restrict__ a,            // (B, K)
        const float* __restrict__ V,            // (N, K)
        const float* __restrict__ c,            // (N,)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const int* __restrict__ entry_rows,     // (nnz,)
        float s, float m_off, int identity,
        int B, int K,
        const int* __restrict__ window) {       // (1,) entries a window: the batch's
    Lanes l = lanes_of(K);
    int nnz = indptr[B], C = *window;
    for (int w = blockIdx.x; w * C < nnz; w += gridDim.x) {
        int t0 = w * C, t1 = min(t0 + C, nnz);
        walk_segments(t0, t1, [&](int t) { return entry_rows[t]; },
                      [&](int b, int s0, int s1, bool, bool) {
            row_dots(b, s0, s1, a, V, cols, K, l,
                     [&](int t, const int* col, const float (*)[LANE_FLOATS], const float* dot) {
                if (threadIdx.x == 0)
                    for (int u = 0; u < UNROLL; u++)
                        if (col[u] >= 0) {
                            float out = dot[u] + c[col[u]];
                            yhat[t + u] = (identity ? out : s * tanhf(out)) + m_off;
                        }
            });
        });
    }
}

// By row: the forward, the loss, g, and da.
extern "C" __global__ void sparse_output_rows_kernel(
        float* __restrict__ da,                 // (B, K) out
        float* __restrict__ row_loss,           // (B,) out
        float* __restrict__ g,                  // (nnz,) out: d loss / d out at each entry
        float* pieces, int* arrivals,           // window scratch (common.cuh: Windows)
        const float* __restrict__ a,            // (B, K)
        const float* __restrict__ V,            // (N, K)
        const float* __restrict__ c,            // (N,)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const float* __restrict__ vals,         // (nnz,)
        const u8* __restrict__ keep,            // (nnz,)
        const int* __restrict__ entry_rows,     // (nnz,)
        const float* __restrict__ row_weight,   // (B,)
        const int* __restrict__ row_entries,    // (B,) |K_b|
        float alpha, float beta, float s, float m_off, int identity,
        float row_norm,                         // a row's errors weigh 1/|K_b|^row_norm
        int B, int K,
        const int* __restrict__ window) {       // (1,) entries a window: the batch's
    Lanes l = lanes_of(K);
    Windows win = {*window, indptr[B], pieces, pieces_stride(K), arrivals};
    auto finish = [&](int b, const Acc& acc) {
        lanes_store(da + (size_t)b * K, acc.x, l);
        if (threadIdx.x == 0) row_loss[b] = acc.s;
    };
    auto add = [&](Acc& acc, int b, int s0, int s1) {
        float rw = row_weight[b], n_obs = (float)row_entries[b];
        if (row_norm != 1.0f) n_obs = powf(n_obs, row_norm);     // the paper's 1/|K_b|: exact
        row_dots(b, s0, s1, a, V, cols, K, l, [&](int t, const int* col,
                                                 const float (*v)[LANE_FLOATS],
                                                 const float* dot) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                if (col[u] < 0) continue;
                float w = (keep[t + u] ? beta : alpha) / n_obs;
                float out = dot[u] + c[col[u]], tanh_out = tanhf(out);
                float err = (identity ? out : s * tanh_out) + m_off - vals[t + u];
                float slope = identity ? 1.0f : s * (1.0f - tanh_out * tanh_out);  // dyhat/dout
                float gp = rw * w * 2.0f * err * slope;
                acc.s += w * err * err;
                if (threadIdx.x == 0) g[t + u] = gp;
                for (int i = 0; i < LANE_FLOATS; i++) acc.x[i] += gp * v[u][i];
            }
        });
    };
    for (int b = blockIdx.x; b < B; b += gridDim.x)
        if (indptr[b] == indptr[b + 1]) finish(b, acc_zero());
    for (int w = blockIdx.x; w * win.C < win.nnz; w += gridDim.x)
        reduce_rows(w, win, indptr, entry_rows, l, add, finish);
}

// By column: dV and dc, each column's run summed in col_order order.
extern "C" __global__ void sparse_output_cols_kernel(
        float* __restrict__ dV,                 // (N, K) accumulated
        float* __restrict__ dc,                 // (N,) accumulated
        float* pieces, int* arrivals,           // window scratch (common.cuh: Windows)
        const float* __restrict__ g,            // (nnz,)
        const float* __restrict__ a,            // (B, K)
        const int* __restrict__ indptr,         // (B+1,)
        const int* __restrict__ cols,           // (nnz,)
        const int* __restrict__ entry_rows,     // (nnz,)
        const int* __restrict__ col_order,      // (nnz,)
        int B, int K,
        const int* __restrict__ window) {       // (1,) entries a window: the batch's
    Lanes l = lanes_of(K);
    Windows win = {*window, indptr[B], pieces, pieces_stride(K), arrivals};
    auto finish = [&](int j, const Acc& acc) {
        lanes_add_to(dV + (size_t)j * K, acc.x, l);
        if (threadIdx.x == 0) dc[j] += acc.s;
    };
    auto add = [&](Acc& acc, int, int s0, int s1) {
        add_rows(acc, s0, s1, a, K, l, [&](int t, int& b, float& gp) {
            int p = col_order[t];
            b = entry_rows[p];
            gp = g[p];
            return true;
        });
    };
    for (int w = blockIdx.x; w * win.C < win.nnz; w += gridDim.x)
        reduce_columns(w, win, col_order, cols, l, add, finish);
}
