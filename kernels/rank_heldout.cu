// rank_heldout: ranks (B,) = how many candidate columns score >= the row's held-out column.
// Candidates: every column except the row's excluded ones (its training entries) and the
// held-out column itself; ties count against the held-out item, and a NaN held-out score ranks
// behind every candidate (the CPU mirror's rules).
// Work split: one block per row; threads stride over the N scores, then over the excluded
// entries; both counts are fixed-order block sums.
#include "common.cuh"

extern "C" __global__ void rank_heldout_kernel(
        int* ranks,                 // (B,) out
        const float* scores,        // (B, N)
        const int* heldout,         // (B,)
        const int* excl_indptr,     // (B+1,)
        const int* excl_cols,       // (nnz,)
        int N) {
    __shared__ int scratch[BLOCK];
    int b = blockIdx.x;
    const float* row = scores + (size_t)b * N;
    float target = row[heldout[b]];
    bool worst = target != target;
    int count = 0;
    for (int j = threadIdx.x; j < N; j += blockDim.x) count += worst || row[j] >= target;
    for (int p = excl_indptr[b] + threadIdx.x; p < excl_indptr[b + 1]; p += blockDim.x)
        count -= worst || row[excl_cols[p]] >= target;
    count = block_sum(count, scratch);
    if (threadIdx.x == 0) ranks[b] = count - 1;    // the held-out column counted itself
}
