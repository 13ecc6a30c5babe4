// Shared by the portable kernels of data-dependent sizes (op_nonzero.cpp, op_index_tensor.cpp).
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln {
namespace kernels {
namespace portable {

// Whether element i of a tensor's data is non-zero (a mask element is set).
using NonzeroFn = bool (*)(const void* data, int64_t i);
// The test for dtype t; nullptr for a value outside the enum.
NonzeroFn nonzero_fn(ScalarType t);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
