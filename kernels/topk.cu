// topk: each row's M best columns, best first, among its candidates: the columns that are not
// excluded (the row's training entries) and whose score is not NaN. Ties go to the lower column
// index; a row with fewer than M candidates is padded with index -1 and score -inf.
// The launcher first copies the scores and writes NaN at the excluded columns
// (mask_excluded_kernel), so the selection kernel needs no set lookups.
// Work split: one block per row, in three barrier-separated stages:
//   1. radix select: four 8-bit histogram passes over order-preserving integer keys find the
//      key T of the M-th best candidate, and how many candidates equal to T make the cut;
//   2. ordered compaction: the row is walked in index order a block-width at a time; a block
//      scan gives each candidate > T, and the first candidates == T, their slot in shared memory;
//   3. a bitonic sort of the (at most MAX_TOPK) chosen (key, index) pairs, best first.
// Integer histograms, scans and sorts only: the result does not depend on thread timing.
#include "common.cuh"

#define NO_INDEX 0x7fffffff

// Larger float -> larger unsigned key (-0 counted as +0); NaN is never passed in.
__device__ __forceinline__ u32 order_key(float x) {
    if (x == 0.0f) x = 0.0f;
    u32 bits = __float_as_uint(x);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// (key a, index i) goes before (key b, index j).
__device__ __forceinline__ bool ranks_before(u32 a, int i, u32 b, int j) {
    return a > b || (a == b && i < j);
}

// Exclusive prefix sum of v over the block (Hillis-Steele in shared memory); *total gets the sum.
__device__ int block_exclusive_scan(int v, int* scratch, int* total) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset *= 2) {
        int add = threadIdx.x >= offset ? scratch[threadIdx.x - offset] : 0;
        __syncthreads();
        scratch[threadIdx.x] += add;
        __syncthreads();
    }
    int inclusive = scratch[threadIdx.x];
    *total = scratch[BLOCK - 1];
    __syncthreads();
    return inclusive - v;
}

// scores[b, excl_cols[p]] = NaN for the row's excluded entries. One block per row.
extern "C" __global__ void mask_excluded_kernel(
        float* scores,              // (B, N) masked in place
        const int* excl_indptr,     // (B+1,)
        const int* excl_cols,       // (nnz,)
        int N) {
    int b = blockIdx.x;
    for (int p = excl_indptr[b] + threadIdx.x; p < excl_indptr[b + 1]; p += blockDim.x)
        scores[(size_t)b * N + excl_cols[p]] = __int_as_float(0x7fffffff);
}

extern "C" __global__ void topk_kernel(
        int* top_idx,               // (B, M) out
        float* top_vals,            // (B, M) out
        const float* scores,        // (B, N), NaN where not a candidate
        int N, int M) {
    __shared__ u32 sel_key[MAX_TOPK];
    __shared__ int sel_idx[MAX_TOPK];
    __shared__ int scratch[BLOCK];
    __shared__ int hist[256];
    __shared__ u32 cut_prefix;
    __shared__ int cut_need;
    int b = blockIdx.x, tid = threadIdx.x;
    const float* row = scores + (size_t)b * N;

    int mine = 0;
    for (int j = tid; j < N; j += BLOCK) mine += !isnan(row[j]);
    int n_cand = block_sum(mine, scratch);

    // 1. Take every candidate with key > threshold, and the `need` first with key == threshold.
    //    With no more than M candidates all are taken: every candidate's key is > 0.
    u32 threshold = 0;
    int need = 0;
    if (n_cand > M) {
        u32 prefix = 0, mask = 0;
        int remaining = M;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = tid; i < 256; i += BLOCK) hist[i] = 0;
            __syncthreads();
            for (int j = tid; j < N; j += BLOCK) {
                float x = row[j];
                if (isnan(x)) continue;
                u32 key = order_key(x);
                if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
            }
            __syncthreads();
            if (tid == 0) {                  // the digit at which the best `remaining` end
                int above = 0;
                for (int digit = 255; digit >= 0; digit--) {
                    if (above + hist[digit] >= remaining) {
                        cut_prefix = prefix | ((u32)digit << shift);
                        cut_need = remaining - above;
                        break;
                    }
                    above += hist[digit];
                }
            }
            __syncthreads();
            prefix = cut_prefix;
            remaining = cut_need;
            mask |= 255u << shift;
            __syncthreads();                 // before the next pass resets hist
        }
        threshold = prefix;
        need = remaining;
    }
    int count = n_cand > M ? M : n_cand;
    int n_greater = count - need;

    // 2. Ordered compaction into sel_key / sel_idx [0, count).
    int greater_done = 0, equal_done = 0;
    for (int base = 0; base < N; base += BLOCK) {
        int j = base + tid;
        float x = j < N ? row[j] : 0.0f;
        bool candidate = j < N && !isnan(x);
        u32 key = candidate ? order_key(x) : 0u;
        int greater = candidate && key > threshold;
        int equal = candidate && need > 0 && key == threshold;
        int n_greater_here, n_equal_here;
        int at_greater = block_exclusive_scan(greater, scratch, &n_greater_here);
        int at_equal = block_exclusive_scan(equal, scratch, &n_equal_here);
        if (greater) {
            sel_key[greater_done + at_greater] = key;
            sel_idx[greater_done + at_greater] = j;
        }
        if (equal && equal_done + at_equal < need) {
            sel_key[n_greater + equal_done + at_equal] = key;
            sel_idx[n_greater + equal_done + at_equal] = j;
        }
        greater_done += n_greater_here;
        equal_done += n_equal_here;
    }

    // 3. Bitonic sort of the power-of-two span holding them; padding sorts last.
    int span = 1;
    while (span < count) span *= 2;
    for (int i = count + tid; i < span; i += BLOCK) {
        sel_key[i] = 0u;
        sel_idx[i] = NO_INDEX;
    }
    __syncthreads();
    for (int size = 2; size <= span; size *= 2) {
        for (int stride = size / 2; stride > 0; stride /= 2) {
            for (int i = tid; i < span; i += BLOCK) {
                int l = i ^ stride;
                if (l <= i) continue;
                bool l_first = ranks_before(sel_key[l], sel_idx[l], sel_key[i], sel_idx[i]);
                bool i_first = ranks_before(sel_key[i], sel_idx[i], sel_key[l], sel_idx[l]);
                if ((i & size) == 0 ? l_first : i_first) {
                    u32 k = sel_key[i]; sel_key[i] = sel_key[l]; sel_key[l] = k;
                    int t = sel_idx[i]; sel_idx[i] = sel_idx[l]; sel_idx[l] = t;
                }
            }
            __syncthreads();
        }
    }
    for (int r = tid; r < M; r += BLOCK) {
        bool filled = r < count;
        top_idx[(size_t)b * M + r] = filled ? sel_idx[r] : -1;
        top_vals[(size_t)b * M + r] = filled ? row[sel_idx[r]] : __int_as_float(0xff800000);
    }
}
