// Copies of strided views into contiguous memory (permute, expand, slice, cat).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kiln/tensor.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

// Row-major element strides of `t`.
void contiguous_strides(Span<const int64_t> sizes, int64_t* strides);

// Copies `n` elements of `elem` bytes each (dtype-agnostic kernels work on bytes).
inline void copy_elements(void* dst, const void* src, int64_t n, size_t elem) {
  if (n > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(n) * elem);
}

// Copies a strided view of `src` (sizes/strides in elements, up to kMaxDims dims)
// into contiguous `dst`; used by permute, expand and slice.
void strided_copy(void* dst, const void* src, size_t elem, const Dims& sizes, const int64_t* strides);

}  // namespace kernels
}  // namespace kiln
