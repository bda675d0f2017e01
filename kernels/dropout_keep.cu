// dropout_keep: keep (nnz,) uint8 = 1 where an entry survives input dropout this epoch.
// The flag is a pure function of (seed, epoch) -> stream, the entry's id in the training CSR
// and the threshold (see common.cuh), so masks match the CPU backend bit for bit and do not
// depend on batching. Work split: one thread per entry.
#include "common.cuh"

extern "C" __global__ void dropout_keep_kernel(
        u8* keep,                   // (nnz,) out
        const int* entry_ids,       // (nnz,)
        u64 stream, u32 threshold, int nnz) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < nnz) keep[p] = dropout_kept(stream, entry_ids[p], threshold);
}
