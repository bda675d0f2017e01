// adam, the versions tried, side by side (as llm.c's dev/cuda keeps them): each is checked
// against ncae_cuda/ops/reference.py, then timed on a GPU, by
//     python -m dev.cuda.run adam [--shape ml10m|lastfm|delicious]
// until a GPU decides between them.
//   1. a grid-stride loop, one element a thread, so a block per BLOCK elements; thread 0 of
//      every block computes the bias corrections in double (two pow, a division, a square
//      root) before a barrier: in a cycle-level simulation of an A100 (issue 24), 7,339 cycles
//      a block against 3,003 with the corrections passed in. The step count lives in
//      counter[0]; counter[1] counts the blocks done, and the last moves the step on.
//   2. version 1 on one wave of blocks (as many as the SMs hold at once), striding over the
//      buffer: the corrections once a block, every block at once.
//   3. one element a thread, the corrections computed once a step, a step ahead, by block 0
//      of the launch before, and read by every block: kernels/adam.cu, the one in use
//      (adam_kernel). On an H200 (bench/results/2026-11-28-h200-gpu-check) it moved 62% of
//      the copy bandwidth where torch's fused Adam moved nearly all of it.
//   4. version 3 with four elements a thread per step, one float4 of each buffer (adam.cuh:
//      adam_elements4), on one wave of blocks striding over the buffer.
//   5. version 4 on a block per BLOCK float4s: every thread one float4, no stride.
#include "common.cuh"
#include "adam.cuh"

extern "C" __global__ void adam_kernel1(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        int* counter,                           // (2,) steps taken; blocks finished
        double lr, double beta1, double beta2,  // for the bias corrections
        double lr_decay, int steps_per_epoch,   // the learning-rate schedule (0: constant),
        int decay_start,                        // counted from this step count
        float b1, float one_minus_b1, float b2, float one_minus_b2,   // rounded once, on the host
        float eps, float weight_decay, long long n) {
    __shared__ float lr_t, inv_sqrt_bc2;
    int t = counter[0] + 1;
    if (threadIdx.x == 0) {
        double lr_epoch = steps_per_epoch > 0
                          ? lr * pow(lr_decay, (double)((t - 1 - decay_start) / steps_per_epoch))
                          : lr;
        lr_t = (float)(lr_epoch / (1.0 - pow(beta1, (double)t)));
        inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(beta2, (double)t)));
    }
    __syncthreads();
    adam_elements(params, m, v, grads, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2, one_minus_b2,
                  eps, weight_decay, n);
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(counter + 1, 1) == (int)gridDim.x - 1) {
        counter[0] = t;
        counter[1] = 0;
    }
}

// Versions 4 and 5: the kernel in use, kernels/adam.cu, with its loop four elements at a time
// (the grid is the launcher's). Its signature is written out again, as every version's is: the
// emulator finds a kernel by the signature in the source.
extern "C" __global__ void adam_kernel4(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        AdamState* state,                       // the step count, corrections a step ahead
        double lr, double beta1, double beta2,  // for the bias corrections
        double lr_decay, int steps_per_epoch,   // the learning-rate schedule (0: constant),
        int decay_start,                        // counted from this step count
        float b1, float one_minus_b1, float b2, float one_minus_b2,   // rounded once, on the host
        float eps, float weight_decay, long long n) {
    Corrections c = this_step(state, {lr, beta1, beta2, lr_decay, steps_per_epoch, decay_start,
                                      0, 0.0f, 0.0f});
    adam_elements4(params, m, v, grads, c.lr_t, c.inv_sqrt_bc2, b1, one_minus_b1, b2,
                   one_minus_b2, eps, weight_decay, n);
    step_done(state, c);
}
