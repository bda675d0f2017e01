// gather_forward: a1 (B, K) = tanh(b1 + sum over the row's kept entries of
// scale * val * E[col]), the input layer of the autoencoder with tanh fused.
// E (N, K) is row-major, so each entry's embedding row is one contiguous read.
// Work split: one block per batch row; threads stride over K, each summing its k over the row's
// entries in CSR order (the same order on every run: deterministic).
#include "common.cuh"

extern "C" __global__ void gather_forward_kernel(
        float* a1,                  // (B, K) out
        const int* indptr,          // (B+1,)
        const int* cols,            // (nnz,)
        const float* vals,          // (nnz,)
        const unsigned char* keep,  // (nnz,)
        const float* E,             // (N, K)
        const float* b1,            // (K,)
        float scale, int K) {
    int b = blockIdx.x;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float acc = b1[k];
        for (int p = indptr[b]; p < indptr[b + 1]; p++) {
            if (keep[p]) acc += vals[p] * scale * E[(size_t)cols[p] * K + k];
        }
        a1[(size_t)b * K + k] = tanhf(acc);
    }
}
