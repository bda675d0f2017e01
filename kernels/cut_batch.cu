// cut_batch: a training step's batch, cut from the training CSR into the step's fixed buffers
// as the epoch plan (ncae_cuda/plan.py) lays it out, input dropout's keep flags fused in; also
// an evaluation batch, from a plan of one step without column order or dropout.
// Everything that changes from step to step comes from device memory: the step to cut
// (plan[0], advanced by step_loss), the dropout threshold (plan[1]) and stream (plan[2..3]),
// so the launch is the same for every step and can be replayed from a CUDA graph. The step's
// window sizes (ncae_cuda/plan.py: window_sizes) are cut with it, for the window kernels.
// The training CSR may be a column shard's part of the training matrix (ncae_cuda/shard.py):
// an entry's dropout is drawn by its id in the whole matrix (its row's first id, src_first,
// plus its place in the row), and a row's entry count is the whole row's (src_entries).
// Work split: a grid-stride loop, one entry per thread; an entry finds its row by a binary
// search of the batch's row pointers (B+1 values, cached).
#include "common.cuh"

extern "C" __global__ void cut_batch_kernel(
        int* __restrict__ indptr,               // (B+1,) out: the batch
        int* __restrict__ cols,                 // (nnz,) out
        float* __restrict__ vals,               // (nnz,) out
        u8* __restrict__ keep,                  // (nnz,) out
        int* __restrict__ entry_rows,           // (nnz,) out
        int* __restrict__ col_order,            // (nnz,) out, unless epoch_col_order is null
        float* __restrict__ row_weight,         // (B,) out
        int* __restrict__ row_entries,          // (B,) out
        int* __restrict__ window_sizes,         // (2,) out: windows over rows, over columns
        const int* __restrict__ plan,           // (4,) step, threshold, stream (u64)
        const int* __restrict__ order,          // (n_rows,) the rows in epoch order
        const int* __restrict__ batch_indptr,   // (steps, B+1) each step's row pointers
        const int* __restrict__ windows,        // (steps, 2) each step's window sizes
        const int* __restrict__ col_offsets,    // (steps+1,) each step's start in ...
        const int* __restrict__ epoch_col_order,// (entries,) ... its entries in column order
        const int* __restrict__ src_indptr,     // the training CSR
        const int* __restrict__ src_indices,
        const float* __restrict__ src_data,
        const int* __restrict__ src_first,      // (rows,) each row's first entry's id ...
        const int* __restrict__ src_entries,    // (rows,) ... and entries, in the whole matrix
        int n_rows, int B) {
    int s = plan[0];
    u32 threshold = (u32)plan[1];
    u64 stream = *reinterpret_cast<const u64*>(plan + 2);
    const int* bi = batch_indptr + (size_t)s * (B + 1);
    int first = s * B, n = min(B, n_rows - first), nnz = bi[B];
    int thread = blockIdx.x * blockDim.x + threadIdx.x, threads = gridDim.x * blockDim.x;
    if (thread < 2) window_sizes[thread] = windows[2 * s + thread];
    for (int b = thread; b <= B; b += threads) {
        indptr[b] = bi[b];
        if (b < B) {
            row_weight[b] = b < n ? 1.0f / n : 0.0f;
            row_entries[b] = b < n ? src_entries[order[first + b]] : 0;
        }
    }
    for (int t = thread; t < nnz; t += threads) {
        int lo = 0, hi = B;                     // bi[lo] <= t < bi[hi]
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (bi[mid] <= t) lo = mid;
            else hi = mid;
        }
        int r = order[first + lo];
        int e = src_indptr[r] + t - bi[lo];
        cols[t] = src_indices[e];
        vals[t] = src_data[e];
        keep[t] = dropout_kept(stream, src_first[r] + t - bi[lo], threshold);
        entry_rows[t] = lo;
        if (epoch_col_order) col_order[t] = epoch_col_order[col_offsets[s] + t];
    }
}
