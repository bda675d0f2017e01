// One Adam step's parts: the per-element update, the loops over a flat buffer that use it, and
// the step's state in device memory (the step count, the bias corrections a step ahead). The
// kernel in use (adam.cu) and its versions (dev/cuda/adam.cu) are made of these.
#pragma once

// One element:
//   g = grad + wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps);  and the gradient is zeroed (by the caller).
__device__ __forceinline__ void adam_element(
        float& p, float& m, float& v, float grad,
        float lr_t, float inv_sqrt_bc2,         // lr / (1 - b1^t), 1 / sqrt(1 - b2^t)
        float b1, float one_minus_b1, float b2, float one_minus_b2,   // rounded once, on the host
        float eps, float weight_decay) {
    float g = grad + weight_decay * p;
    m = b1 * m + one_minus_b1 * g;
    v = b2 * v + one_minus_b2 * g * g;
    p -= lr_t * m / (sqrtf(v) * inv_sqrt_bc2 + eps);
}

// A grid-stride loop, one element per thread per step, so any grid covers any n.
__device__ __forceinline__ void adam_elements(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        float lr_t, float inv_sqrt_bc2, float b1, float one_minus_b1, float b2,
        float one_minus_b2, float eps, float weight_decay, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        adam_element(params[i], m[i], v[i], grads[i], lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                     one_minus_b2, eps, weight_decay);
        grads[i] = 0.0f;
    }
}

// The same loop four elements at a time, one float4 of each buffer per thread per step: a
// quarter of the loads and stores in flight for the same bytes. The buffers are views of one
// layout at one offset, so they share their distance from a 16-byte boundary: the elements
// before the first boundary and after the last whole float4 go one at a time (where the four
// do not share it, every element does).
__device__ __forceinline__ void adam_elements4(
        float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,  // (n,)
        float* __restrict__ grads,              // (n,) read, then zeroed
        float lr_t, float inv_sqrt_bc2, float b1, float one_minus_b1, float b2,
        float one_minus_b2, float eps, float weight_decay, long long n) {
    size_t phase = ((size_t)params / sizeof(float)) % 4;
    if (((size_t)m / sizeof(float)) % 4 != phase || ((size_t)v / sizeof(float)) % 4 != phase ||
        ((size_t)grads / sizeof(float)) % 4 != phase) {
        adam_elements(params, m, v, grads, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                      one_minus_b2, eps, weight_decay, n);
        return;
    }
    long long head = min((long long)((4 - phase) % 4), n);     // elements before the boundary
    long long quads = (n - head) / 4, tail = head + 4 * quads;
    long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    float4* p4 = reinterpret_cast<float4*>(params + head);
    float4* m4 = reinterpret_cast<float4*>(m + head);
    float4* v4 = reinterpret_cast<float4*>(v + head);
    float4* g4 = reinterpret_cast<float4*>(grads + head);
    for (long long q = first; q < quads; q += stride) {
        float4 p = p4[q], mq = m4[q], vq = v4[q], g = g4[q];
        adam_element(p.x, mq.x, vq.x, g.x, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                     one_minus_b2, eps, weight_decay);
        adam_element(p.y, mq.y, vq.y, g.y, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                     one_minus_b2, eps, weight_decay);
        adam_element(p.z, mq.z, vq.z, g.z, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                     one_minus_b2, eps, weight_decay);
        adam_element(p.w, mq.w, vq.w, g.w, lr_t, inv_sqrt_bc2, b1, one_minus_b1, b2,
                     one_minus_b2, eps, weight_decay);
        p4[q] = p;
        m4[q] = mq;
        v4[q] = vq;
        g4[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (long long i = first; i < head + (n - tail); i += stride) {    // head, then tail
        long long e = i < head ? i : tail + (i - head);
        adam_element(params[e], m[e], v[e], grads[e], lr_t, inv_sqrt_bc2, b1, one_minus_b1,
                     b2, one_minus_b2, eps, weight_decay);
        grads[e] = 0.0f;
    }
}

// ---- the step's state --------------------------------------------------------------------------
// The bias corrections are folded in double, as the CPU backend folds them on the host: two
// pow, a division and a square root, thousands of cycles, which a block spent before its first
// element when each block computed them. They are computed once a step instead, a step ahead:
// block 0 of a launch, once its elements are done, computes the next step's while the other
// blocks stream, and files them with the schedule they follow. Every block of the next launch
// reads them; where they are not for its step and schedule (the first step, a new schedule),
// each thread computes them itself. They are the same numbers either way. The last block to
// finish (AdamState.finished counts them, as in CUDA's threadFenceReduction sample) moves the
// step count on, after every block has read it.

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

// This launch's step (t = steps taken + 1) with its corrections: filed a step ahead, or
// computed here.
__device__ Corrections this_step(const AdamState* state, Corrections schedule) {
    schedule.step = state->steps + 1;
    Corrections c = state->ahead[schedule.step % 2];
    return same_step(c, schedule) ? c : corrected(schedule);
}

// After a block's elements: block 0 files the next step's corrections, and the last block to
// finish moves the step count on. Every thread of the block calls it.
__device__ void step_done(AdamState* state, Corrections step) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // the other slot: no block reads it now
        Corrections next = step;
        next.step = step.step + 1;
        state->ahead[next.step % 2] = corrected(next);
    }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(&state->finished, 1) == (int)gridDim.x - 1) {
        state->steps = step.step;
        state->finished = 0;
    }
}
