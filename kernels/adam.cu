// adam: one Adam step over a flat parameter buffer (every weight and bias at once, or the tail
// that pre-training trains), L2 added to the gradient (not AdamW), the gradient zeroed for the
// next step (adam.cuh: adam_element):
//   g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps),  lr_t = lr / (1 - b1^t), inv_sqrt_bc2 =
//   1 / sqrt(1 - b2^t).  With steps_per_epoch > 0 the learning rate decays by epoch:
//   lr * lr_decay^((t-1-decay_start) / steps_per_epoch).
// The step count t lives in device memory (adam.cuh: AdamState), so a step can be replayed from
// a CUDA graph; the bias corrections are computed once a step, a step ahead (adam.cuh).
// Memory-bound: 4 reads and 4 writes per parameter.
// Work split: a grid-stride loop, one element per thread per step (adam.cuh: adam_elements).
#include "common.cuh"
#include "adam.cuh"

extern "C" __global__ void adam_kernel(
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
    adam_elements(params, m, v, grads, c.lr_t, c.inv_sqrt_bc2, b1, one_minus_b1, b2,
                  one_minus_b2, eps, weight_decay, n);
    step_done(state, c);
}
