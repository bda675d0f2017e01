// adam: one Adam step over a flat parameter buffer (every weight and bias at once, or the tail
// that pre-training trains), L2 added to the gradient (not AdamW):
//   g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps),  lr_t = lr / (1 - b1^t), inv_sqrt_bc2 =
//   1 / sqrt(1 - b2^t);  and the gradient is zeroed for the next step. With steps_per_epoch > 0
//   the learning rate decays by epoch: lr * lr_decay^((t-1-decay_start) / steps_per_epoch).
// The step count t lives in device memory (AdamState), so a step can be replayed from a CUDA
// graph. The bias corrections are folded in double, as the CPU backend folds them on the host:
// two pow, a division and a square root, thousands of cycles, which a block spent before its
// first element when each block computed them. They are computed once a step instead, a step
// ahead: block 0 of a launch, once its elements are done, computes the next step's while the
// other blocks stream, and files them with the schedule they follow. Every block of the next
// launch reads them; where they are not for its step and schedule (the first step, a new
// schedule), each thread computes them itself. They are the same numbers either way.
// Memory-bound: 4 reads and 4 writes per parameter.
// Work split: a grid-stride loop, one element per thread per step (adam.cuh); the last block to
// finish (AdamState.finished counts them, as in CUDA's threadFenceReduction sample) moves the
// step count on, after every block has read it.
#include "common.cuh"
#include "adam.cuh"

// A step's bias corrections, with all they are a function of.
struct Corrections {
    double lr, beta1, beta2, lr_decay;      // the schedule ...
    int steps_per_epoch, decay_start;
    int step;                               // ... and the step t (0: none)
    float lr_t, inv_sqrt_bc2;               // t's epoch's lr / (1 - beta1^t), 1/sqrt(1 - beta2^t)
};

// Adam's state in device memory (ADAM_STATE_WORDS int32, zeroed by the host, the step count
// first: the host reads and writes only that).
struct AdamState {
    int steps;                              // steps taken
    int finished;                           // blocks of the running launch that are done
    Corrections ahead[2];                   // a step's corrections, filed by its parity
};
static_assert(sizeof(AdamState) <= ADAM_STATE_WORDS * sizeof(int), "AdamState outgrew its words");

// c with its corrections filled in, from its schedule and step.
__device__ Corrections corrected(Corrections c) {
    double lr_epoch = c.steps_per_epoch > 0
                      ? c.lr * pow(c.lr_decay,
                                   (double)((c.step - 1 - c.decay_start) / c.steps_per_epoch))
                      : c.lr;
    c.lr_t = (float)(lr_epoch / (1.0 - pow(c.beta1, (double)c.step)));
    c.inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(c.beta2, (double)c.step)));
    return c;
}

__device__ bool same_step(const Corrections& a, const Corrections& b) {
    return a.step == b.step && a.lr == b.lr && a.beta1 == b.beta1 && a.beta2 == b.beta2 &&
           a.lr_decay == b.lr_decay && a.steps_per_epoch == b.steps_per_epoch &&
           a.decay_start == b.decay_start;
}

extern "C" __global__ void adam_kernel(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        AdamState* state,                       // the step count, corrections a step ahead
        double lr, double beta1, double beta2,  // for the bias corrections
        double lr_decay, int steps_per_epoch,   // the learning-rate schedule (0: constant),
        int decay_start,                        // counted from this step count
        float b1, float one_minus_b1, float b2, float one_minus_b2,   // rounded once, on the host
        float eps, float weight_decay, long long n) {
    int t = state->steps + 1;
    Corrections step = {lr, beta1, beta2, lr_decay, steps_per_epoch, decay_start, t, 0.0f, 0.0f};
    Corrections c = state->ahead[t % 2];
    if (!same_step(c, step)) c = corrected(step);
    adam_elements(params, m, v, grads, c.lr_t, c.inv_sqrt_bc2, b1, one_minus_b1, b2,
                  one_minus_b2, eps, weight_decay, n);
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // the other slot: no block reads it now
        step.step = t + 1;
        state->ahead[(t + 1) % 2] = corrected(step);
    }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(&state->finished, 1) == (int)gridDim.x - 1) {
        state->steps = t;
        state->finished = 0;
    }
}
