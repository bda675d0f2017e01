// cut_batch: the batch's rows of a CSR, copied into the batch's own entry arrays, and the
// batch's entries grouped by column (the order the deterministic scatters reduce in).
// The host computes the batch's row pointers from its copy of the CSR's indptr (so it knows
// nnz without waiting on the device); these kernels fill the rest.
#include "common.cuh"

// Entries of batch row b -> positions b_indptr[b] .. b_indptr[b+1]. Work split: one block per
// batch row, threads stride over its entries. Padding rows (b >= n_rows) are empty.
extern "C" __global__ void cut_batch_fill_kernel(
        int* cols, float* vals, int* entry_ids, int* entry_rows,   // (nnz,) out
        const int* src_indptr, const int* src_indices, const float* src_data,  // source CSR
        const int* rows,            // (n_rows,) source row of each batch row
        const int* b_indptr,        // (B+1,) batch row pointers
        int n_rows) {
    int b = blockIdx.x;
    if (b >= n_rows) return;
    int src = src_indptr[rows[b]];
    for (int p = b_indptr[b] + threadIdx.x; p < b_indptr[b + 1]; p += blockDim.x) {
        int e = src + p - b_indptr[b];
        cols[p] = src_indices[e];
        vals[p] = src_data[e];
        entry_ids[p] = e;
        entry_rows[p] = b;
    }
}

// run_start[t] = 1 where the t-th entry in column order starts a new column's run.
// Work split: one thread per entry.
extern "C" __global__ void column_run_starts_kernel(
        int* run_start,             // (nnz,) out
        const int* cols, const int* col_order, int nnz) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < nnz) run_start[t] = t == 0 || cols[col_order[t]] != cols[col_order[t - 1]];
}

// From the inclusive scan of run_start (run_index[t] = 1 + the run of entry t): each run's
// column and first position. col_ptr and col_ids come pre-filled with nnz and -1, so the runs
// past the last distinct column are empty: kernels over runs skip them. One thread per entry.
extern "C" __global__ void column_runs_kernel(
        int* col_ptr, int* col_ids, // (nnz+1,), (nnz,) out
        const int* run_start, const int* run_index, const int* cols, const int* col_order,
        int nnz) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < nnz && run_start[t]) {
        int u = run_index[t] - 1;
        col_ptr[u] = t;
        col_ids[u] = cols[col_order[t]];
    }
}
