// One Adam step over the elements of a flat buffer that this thread owns, given the step's bias
// corrections: the loop of the kernel in use (adam.cu) and of its versions (dev/cuda/adam.cu).
#pragma once

// A grid-stride loop, one element per thread per step, so any grid covers any n:
//   g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps);  grad = 0.
__device__ __forceinline__ void adam_elements(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        float lr_t, float inv_sqrt_bc2,         // lr / (1 - b1^t), 1 / sqrt(1 - b2^t)
        float b1, float one_minus_b1, float b2, float one_minus_b2,   // rounded once, on the host
        float eps, float weight_decay, long long n) {
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
}
