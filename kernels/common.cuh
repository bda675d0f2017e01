// Shared by every kernel: the numbers Python shares with CUDA, the dropout hash (the device
// twin of ncae_cuda/ops/common.py), deterministic block reductions, and the window reduction
// that keeps every SM busy whatever the row lengths. NVRTC compiles these files at run time, so
// nothing here may include a host or standard-library header.
#pragma once

#include "device_numbers.cuh"
static_assert(LANE_FLOATS == 4, "a lane owns one float4 of a K-vector");
#define SLAB (WARP * LANE_FLOATS)      // the share of a K-vector one warp owns
#define FULL_MASK 0xffffffffu

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

#define GOLDEN 0x9E3779B97F4A7C15ull   // splitmix64's increment
#define MIX1 0xBF58476D1CE4E5B9ull
#define MIX2 0x94D049BB133111EBull
#define KEEP_SHIFT 40                  // 64 - 24: the top 24 bits of the hash are compared

// splitmix64's finalizer: bijective, every input bit reaches every output bit.
__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    return z ^ (z >> 31);
}

// Keep flag of one entry: a pure function of (seed, epoch) -> stream and the entry id.
__device__ __forceinline__ u8 dropout_kept(u64 stream, int entry_id, u32 threshold) {
    return (mix64(stream + (u64)entry_id * GOLDEN) >> KEEP_SHIFT) >= threshold;
}

// v reduced over a block of BLOCK threads by `op` in a fixed tree order (the same result on
// every run). Every thread of the block must call it; `scratch` holds BLOCK values. Returns the
// result to all.
template <typename T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* scratch, Op op) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + half]);
        __syncthreads();
    }
    T total = scratch[0];
    __syncthreads();   // scratch may be reused right after
    return total;
}

template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    return block_reduce(v, scratch, [](T x, T y) { return x + y; });
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    return block_reduce(v, scratch, [](float x, float y) { return fmaxf(x, y); });
}

// ---------------------------------------------------------------------------------------------
// K-vectors split among the lanes of a block: warp s owns the slab k in [s*SLAB, (s+1)*SLAB),
// each lane LANE_FLOATS of it. With K a multiple of 4 a lane's floats are one aligned float4
// (rows of a (., K) array then start 16-byte aligned); otherwise they lie a warp apart, so the
// loads stay coalesced either way. A kernel that works on K-vectors is launched with
// slabs(K) = ceil(K / SLAB) warps a block.

struct Lanes {
    int k0;         // this thread's first k
    int step;       // between its k's: 1 (one float4) or WARP
    int n;          // how many of its LANE_FLOATS k's are < K
    bool vec;       // one float4
};

__device__ __forceinline__ Lanes lanes_of(int K) {
    Lanes l;
    int slab = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    l.vec = K % LANE_FLOATS == 0;
    l.k0 = slab * SLAB + (l.vec ? LANE_FLOATS * lane : lane);
    l.step = l.vec ? 1 : WARP;
    l.n = 0;
    for (int i = 0; i < LANE_FLOATS; i++) l.n += l.k0 + i * l.step < K;
    return l;
}

__device__ __forceinline__ void lanes_load(float* x, const float* __restrict__ row, Lanes l) {
    if (l.vec && l.n) {
        float4 f = *reinterpret_cast<const float4*>(row + l.k0);
        x[0] = f.x; x[1] = f.y; x[2] = f.z; x[3] = f.w;
        return;
    }
    for (int i = 0; i < LANE_FLOATS; i++) x[i] = i < l.n ? row[l.k0 + i * l.step] : 0.0f;
}

// The same through L2 only: for values another block wrote in this launch.
__device__ __forceinline__ void lanes_load_l2(float* x, const float* row, Lanes l) {
    if (l.vec && l.n) {
        float4 f = __ldcg(reinterpret_cast<const float4*>(row + l.k0));
        x[0] = f.x; x[1] = f.y; x[2] = f.z; x[3] = f.w;
        return;
    }
    for (int i = 0; i < LANE_FLOATS; i++) x[i] = i < l.n ? __ldcg(row + l.k0 + i * l.step) : 0.0f;
}

__device__ __forceinline__ void lanes_store(float* row, const float* x, Lanes l) {
    if (l.vec && l.n) {
        *reinterpret_cast<float4*>(row + l.k0) = make_float4(x[0], x[1], x[2], x[3]);
        return;
    }
    for (int i = 0; i < LANE_FLOATS; i++)
        if (i < l.n) row[l.k0 + i * l.step] = x[i];
}

// row += x
__device__ __forceinline__ void lanes_add_to(float* row, const float* x, Lanes l) {
    float y[LANE_FLOATS];
    lanes_load(y, row, l);
    for (int i = 0; i < LANE_FLOATS; i++) y[i] += x[i];
    lanes_store(row, y, l);
}

// The running sums of one segment (a row, or a column's run): this thread's share of a
// K-vector and a scalar (a loss, a bias gradient) that every thread of the block keeps alike.
struct Acc {
    float x[LANE_FLOATS];
    float s;
};

__device__ __forceinline__ Acc acc_zero() {
    Acc a;
    for (int i = 0; i < LANE_FLOATS; i++) a.x[i] = 0.0f;
    a.s = 0.0f;
    return a;
}

// acc += w_t * M[src_t] for the entries t in [s0, s1) that count, in entry order, and acc.s +=
// w_t. entry(t, src, w) reads entry t's row of M and weight, and whether it counts. UNROLL
// entries at a time: every one's src and w, then their rows of M, are loaded before any is
// added, so the loads are in flight together.
template <class Entry>
__device__ __forceinline__ void add_rows(Acc& acc, int s0, int s1, const float* __restrict__ M,
                                         int K, Lanes l, Entry entry) {
    for (int t = s0; t < s1; t += UNROLL) {
        int src[UNROLL];
        bool use[UNROLL];
        float w[UNROLL], x[UNROLL][LANE_FLOATS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) use[u] = t + u < s1 && entry(t + u, src[u], w[u]);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (use[u]) lanes_load(x[u], M + (size_t)src[u] * K, l);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (!use[u]) continue;
            for (int i = 0; i < LANE_FLOATS; i++) acc.x[i] += w[u] * x[u][i];
            acc.s += w[u];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Window reduction. A batch's entries (in row order, or in column order through col_order) are
// cut into windows of C consecutive entries, one block each, so every block has the same work
// however long the rows are. A block sums each segment (row or column run) of its window in
// entry order. A segment inside one window is finished there. A segment that several windows
// share leaves its sums in each as a piece; the last of those windows to arrive (an atomic
// count, as in CUDA's threadFenceReduction sample) adds the pieces up in window order and
// finishes it. Sums therefore never depend on timing: results are bit-identical run to run.
// It reads the pieces UNROLL at a time, all in flight together, as a window reads its entries'
// rows. The host picks each batch's C (ncae_cuda/plan.py: window_sizes) so that every SM gets
// a window where it can, and no segment has more than C pieces: adding two segments' pieces
// then takes no more reads than the window's own entries.

struct Windows {
    int C;              // entries a window
    int nnz;            // entries in the batch
    float* pieces;      // (2 * windows, stride): window w's first segment, when it began before
                        // w, in slot 2w; its last, when it goes on past w, in slot 2w + 1
    int stride;         // floats a piece: K rounded up to LANE_FLOATS, then the scalar's slot
    int* arrivals;      // (windows,): windows arrived of the segment that starts in window w;
                        // all zero between launches (the last to arrive resets its count)
};

__device__ __forceinline__ int pieces_stride(int K) {
    return (K + LANE_FLOATS - 1) / LANE_FLOATS * LANE_FLOATS + LANE_FLOATS;
}

// Window w's piece of a segment that begins in window w0: its last segment's slot when the
// segment begins there, else its first's.
__device__ __forceinline__ float* piece_of(const Windows& win, int w, int w0) {
    return win.pieces + (size_t)(2 * w + (w == w0)) * win.stride;
}

// Hands in the sums of segment `seg`, which spans windows w0..w1, from window w. Every thread
// of the block must call it with the same arguments (it synchronises the block); `finish(seg,
// acc)` is called once per segment, by the block that completes it.
template <class Finish>
__device__ void hand_in(const Acc& acc, int seg, int w, int w0, int w1, const Windows& win,
                        Lanes l, Finish finish) {
    __shared__ int last;
    if (w0 == w1) {
        finish(seg, acc);
        return;
    }
    float* piece = piece_of(win, w, w0);
    lanes_store(piece, acc.x, l);
    if (threadIdx.x == 0) piece[win.stride - LANE_FLOATS] = acc.s;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(win.arrivals + w0, 1) == w1 - w0;
        if (last) win.arrivals[w0] = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    Acc total = acc_zero();
    for (int u0 = w0; u0 <= w1; u0 += UNROLL) {
        float x[UNROLL][LANE_FLOATS], s[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {     // past w1: w1's again, unused (no branch)
            const float* p = piece_of(win, min(u0 + u, w1), w0);
            lanes_load_l2(x[u], p, l);
            s[u] = __ldcg(p + win.stride - LANE_FLOATS);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {     // added in window order
            if (u0 + u > w1) break;
            for (int i = 0; i < LANE_FLOATS; i++) total.x[i] += x[u][i];
            total.s += s[u];
        }
    }
    finish(seg, total);
}

// Calls visit(seg, s0, s1, first, last) for each maximal run [s0, s1) of equal seg_of(t) in
// [t0, t1), in order; first/last: the run touches the window's start/end. The warp finds the
// boundaries 32 entries at a time (one read of seg_of per lane, then a ballot), so short
// segments cost no chain of dependent reads. Every warp of the block makes the same calls.
template <class SegOf, class Visit>
__device__ void walk_segments(int t0, int t1, SegOf seg_of, Visit visit) {
    int lane = threadIdx.x % WARP;
    int current = seg_of(t0), s0 = t0;
    for (int base = t0; base < t1; base += WARP) {
        int t = base + lane;
        int mine = t < t1 ? seg_of(t) : current;
        int before = __shfl_up_sync(FULL_MASK, mine, 1);
        if (lane == 0) before = current;
        unsigned starts = __ballot_sync(FULL_MASK, t < t1 && mine != before);
        while (starts) {
            int i = __ffs(starts) - 1;
            starts &= starts - 1;
            visit(current, s0, base + i, s0 == t0, false);
            s0 = base + i;
            current = __shfl_sync(FULL_MASK, mine, i);
        }
    }
    visit(current, s0, t1, s0 == t0, true);
}

// Window w of the batch's entries in row order: the rows it touches, each summed by add(acc,
// b, s0, s1) and handed in. entry_rows[t] is entry t's row; indptr (B+1) the rows' entries.
template <class Add, class Finish>
__device__ void reduce_rows(int w, const Windows& win, const int* __restrict__ indptr,
                            const int* __restrict__ entry_rows, Lanes l, Add add, Finish finish) {
    int t0 = w * win.C, t1 = min(t0 + win.C, win.nnz);
    walk_segments(t0, t1, [&](int t) { return entry_rows[t]; },
                  [&](int b, int s0, int s1, bool, bool) {
        Acc acc = acc_zero();
        add(acc, b, s0, s1);
        hand_in(acc, b, w, indptr[b] / win.C, (indptr[b + 1] - 1) / win.C, win, l, finish);
    });
}

// Window w of the batch's entries in column order (position t is entry col_order[t]): the
// column runs it touches. A run may span several windows; the windows its first and last runs
// share with this one are found by probing window edges, a lane a window: lane k reads the last
// entry of window w-1-k and the first of window w+1+k, and the columns are ascending, so the
// windows sharing the run are the lanes that match, up to the first that does not. A column
// has at most one entry a row, so a run holds at most B entries: the host keeps
// C >= B / (WARP - 1), and a run shares at most WARP - 1 windows on either side.
template <class Add, class Finish>
__device__ void reduce_columns(int w, const Windows& win, const int* __restrict__ col_order,
                               const int* __restrict__ cols, Lanes l, Add add, Finish finish) {
    int t0 = w * win.C, t1 = min(t0 + win.C, win.nnz);
    auto col = [&](int t) { return cols[col_order[t]]; };
    int lane = threadIdx.x % WARP;
    int before = t0 - 1 - lane * win.C, after = t1 + lane * win.C;
    bool back = before >= 0 && col(before) == col(t0);
    bool on = after < win.nnz && col(after) == col(t1 - 1);
    int w0 = w - (__ffs(~__ballot_sync(FULL_MASK, back)) - 1);    // the first run's first window
    int w1 = w + (__ffs(~__ballot_sync(FULL_MASK, on)) - 1);      // the last run's last window
    walk_segments(t0, t1, col, [&](int j, int s0, int s1, bool first, bool last) {
        Acc acc = acc_zero();
        add(acc, j, s0, s1);
        hand_in(acc, j, w, first ? w0 : w, last ? w1 : w, win, l, finish);
    });
}
