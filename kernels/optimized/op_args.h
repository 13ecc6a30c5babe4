// Tensor arguments of the optimized operators, read the same way at prepare and at run.
#pragma once

#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace optimized {

// At prepare (method load) a method input has its sizes but no storage yet:
// prepare_tensor_arg checks sizes only; run checks storage too (tensor_arg).
inline Status tensor_arg(bool prepare, const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  return prepare ? prepare_tensor_arg(op, in, i, name, out) : kernels::tensor_arg(op, in, i, name, out);
}

// None -> *out = nullptr.
inline Status optional_tensor_arg(bool prepare, const char* op, Inputs in, size_t i, const char* name,
                                  const Tensor** out) {
  if (in[i] != nullptr && in[i]->is_none()) {
    *out = nullptr;
    return Status::ok();
  }
  return tensor_arg(prepare, op, in, i, name, out);
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
