// Strided copies (strided_copy.h).
#include "strided_copy.h"

#include <algorithm>

#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {

void contiguous_strides(Span<const int64_t> sizes, int64_t* strides) {
  int64_t s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= sizes[d];
  }
}

namespace {

template <typename T>
void strided_copy_typed(T* dst, const T* src, const Dims& sizes, const int64_t* strides) {
  const int nd = sizes.n;
  if (nd == 0) {
    *dst = *src;
    return;
  }
  const int64_t inner = sizes[nd - 1], is = strides[nd - 1];
  const int64_t rows = sizes.numel() / std::max<int64_t>(inner, 1);
  if (inner == 0 || rows == 0) return;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / inner);
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims] = {};
    int64_t off = 0, rem = begin;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
      off += idx[d] * strides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      T* o = dst + r * inner;
      const T* s = src + off;
      if (is == 1) {
        std::memcpy(o, s, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t i = 0; i < inner; ++i) o[i] = s[i * is];
      }
      for (int d = nd - 2; d >= 0; --d) {
        off += strides[d];
        if (++idx[d] < sizes[d]) break;
        off -= sizes[d] * strides[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void strided_copy(void* dst, const void* src, size_t elem, const Dims& in_sizes, const int64_t* in_strides) {
  // Drop size-1 dims and merge dims the source walks contiguously, so that
  // rows get as long as possible (slices and cats become plain memcpys).
  Dims sizes;
  int64_t strides[kMaxDims];
  for (int d = 0; d < in_sizes.n; ++d) {
    if (in_sizes[d] == 0) return;
    if (in_sizes[d] == 1) continue;
    if (sizes.n > 0 && strides[sizes.n - 1] == in_strides[d] * in_sizes[d]) {
      sizes[sizes.n - 1] *= in_sizes[d];
      strides[sizes.n - 1] = in_strides[d];
    } else {
      strides[sizes.n] = in_strides[d];
      sizes.push(in_sizes[d]);
    }
  }
  switch (elem) {
    case 1: strided_copy_typed(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), sizes, strides); break;
    case 2: strided_copy_typed(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), sizes, strides); break;
    case 4: strided_copy_typed(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), sizes, strides); break;
    default: strided_copy_typed(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), sizes, strides); break;
  }
}

}  // namespace kernels
}  // namespace kiln
