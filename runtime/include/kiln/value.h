// Value: one slot of a method's value table (a tensor, scalar, list or None).
#pragma once

#include <cstdint>

#include "kiln/span.h"
#include "kiln/tensor.h"

namespace kiln {

enum class ValueKind : uint8_t {
  None,
  Tensor,
  Int,
  Double,
  Bool,
  IntList,
  DoubleList,
  BoolList,
  TensorList,
  String,
};

KILN_API const char* value_kind_name(ValueKind k) noexcept;

// A tagged union. Lists and strings point at storage owned by the loaded method.
struct Value {
  ValueKind kind = ValueKind::None;
  union {
    Tensor* tensor;
    int64_t i;
    double d;
    bool b;
    struct {
      const int64_t* data;
      size_t size;
    } ints;
    struct {
      const double* data;
      size_t size;
    } doubles;
    struct {
      const bool* data;
      size_t size;
    } bools;
    // Elements may be null for None entries of an optional-tensor list.
    struct {
      Tensor* const* data;
      size_t size;
    } tensors;
    struct {
      const char* data;
      size_t size;
    } str;
  };

  Value() noexcept : tensor(nullptr) {}

  bool is_none() const noexcept { return kind == ValueKind::None; }
  bool is_tensor() const noexcept { return kind == ValueKind::Tensor; }
  bool is_scalar() const noexcept {
    return kind == ValueKind::Int || kind == ValueKind::Double || kind == ValueKind::Bool;
  }
  // Precondition: is_tensor() (checked by kernels through the helpers in kernel.h).
  const Tensor& as_tensor() const noexcept { return *tensor; }
  // Int, Double or Bool as a double. Precondition: is_scalar().
  double to_double() const noexcept {
    return kind == ValueKind::Double ? d : kind == ValueKind::Int ? static_cast<double>(i) : (b ? 1.0 : 0.0);
  }
  Span<const int64_t> as_ints() const noexcept { return {ints.data, ints.size}; }
  Span<Tensor* const> as_tensors() const noexcept { return {tensors.data, tensors.size}; }
};

}  // namespace kiln
