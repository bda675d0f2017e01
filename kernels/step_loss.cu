// step_loss: the end of a training step: losses[step] = sum_b row_weight[b] * row_loss[b], the
// batch's mean loss over its real rows, then step += 1, so the next cut_batch cuts the next
// batch. Both live in device memory: the host reads the epoch's losses once, at its end.
// Work split: one block; threads stride over the rows, then a fixed-order block sum.
#include "common.cuh"

extern "C" __global__ void step_loss_kernel(
        float* __restrict__ losses,             // (steps,) the epoch's losses
        int* __restrict__ step,                 // (1,) the step just taken; advanced
        const float* __restrict__ row_loss,     // (B,)
        const float* __restrict__ row_weight,   // (B,)
        int B) {
    __shared__ float scratch[BLOCK];
    float sum = 0.0f;
    for (int b = threadIdx.x; b < B; b += blockDim.x) sum += row_weight[b] * row_loss[b];
    sum = block_sum(sum, scratch);
    if (threadIdx.x == 0) {
        losses[*step] = sum;
        *step += 1;
    }
}
