// adam: one Adam step over a flat parameter buffer (every weight and bias at once, or the tail
// that pre-training trains), L2 added to the gradient (not AdamW):
//   g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps),  lr_t = lr / (1 - b1^t), inv_sqrt_bc2 =
//   1 / sqrt(1 - b2^t);  and the gradient is zeroed for the next step. With steps_per_epoch > 0
//   the learning rate decays by epoch: lr * lr_decay^((t-1-decay_start) / steps_per_epoch).
// The step count t lives in device memory (counter[0] holds the steps taken), so a step can be
// replayed from a CUDA graph; the bias corrections are folded in double, as the CPU backend
// folds them on the host. Memory-bound: 4 reads and 4 writes per parameter.
// Work split: a grid-stride loop, one element per thread per step, so any grid covers any n;
// the last block to finish (counter[1] counts them, as in CUDA's threadFenceReduction sample)
// moves the step count on, after every block has read it.
#include "common.cuh"

extern "C" __global__ void adam_kernel(
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
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float g = grads[i] + weight_decay * params[i];
        float mi = b1 * m[i] + one_minus_b1 * g;
        float vi = b2 * v[i] + one_minus_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr_t * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
        grads[i] = 0.0f;
    }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(counter + 1, 1) == (int)gridDim.x - 1) {
        counter[0] = t;
        counter[1] = 0;
    }
}
