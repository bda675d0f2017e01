// adam: one Adam step over the whole flat parameter buffer (every weight and bias at once),
// L2 added to the gradient (not AdamW); the scalars come folded on the host exactly as for the
// CPU mirror (1 - beta too, so both round alike), bias correction in lr_t and inv_sqrt_bc2:  g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//            p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps),  lr_t = lr / (1 - b1^t).
// Memory-bound: 4 reads and 3 writes per parameter. Work split: a grid-stride loop, one
// element per thread per step, so any grid size covers any n.
#include "common.cuh"

extern "C" __global__ void adam_kernel(
        float* params, float* m, float* v,   // (n,) updated in place
        const float* grads,                  // (n,)
        float lr_t, float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
        float inv_sqrt_bc2, float eps, float weight_decay, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float g = grads[i] + weight_decay * params[i];
        float mi = beta1 * m[i] + one_minus_beta1 * g;
        float vi = beta2 * v[i] + one_minus_beta2 * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr_t * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}
