// VecF32 for the avx512_vnni level: AVX-512's. The level adds integer dot products (vpdpbusd), which
// the int8 microkernels use directly; the float vector is the same.
#pragma once

#include "optimized/simd/vec_avx512.h"
