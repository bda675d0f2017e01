// The numbers Python shares with CUDA, written once: the kernels include this file, and
// ncae_cuda/ops/common.py reads its defines into DEVICE_NUMBERS, by which the launchers size
// their launches. So Python and CUDA cannot launch differently, and every .cu file compiles as
// it stands (nvcc -arch=sm_90 -c kernels/adam.cu). Only `#define NAME integer` lines here.
#pragma once
#define BLOCK 256        // threads a block, for the kernels whose block size is fixed
#define WARP 32
#define LANE_FLOATS 4    // floats of a K-vector a lane owns: one float4
#define UNROLL 4         // entries whose rows are loaded together before any is added
#define MAX_TOPK 1024    // topk's largest M: the chosen M stay in shared memory
#define ADAM_STATE_WORDS 32   // int32 words of Adam's state on the device (adam.cu: AdamState)
