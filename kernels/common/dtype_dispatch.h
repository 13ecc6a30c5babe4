// Dtype dispatch and element conversions without undefined behaviour.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kiln/tensor.h"

namespace kiln {
namespace kernels {

// Calls fn(T{}) with the C++ type of `t` for the listed dtypes; false if not listed.
template <typename F>
bool dispatch_real(ScalarType t, F&& fn) {  // f32 f64 i64 i32
  switch (t) {
    case ScalarType::Float32: fn(float{}); return true;
    case ScalarType::Float64: fn(double{}); return true;
    case ScalarType::Int64: fn(int64_t{}); return true;
    case ScalarType::Int32: fn(int32_t{}); return true;
    default: return false;
  }
}

template <typename F>
bool dispatch_all(ScalarType t, F&& fn) {  // every dtype with a C++ type (no f16/bf16)
  switch (t) {
    case ScalarType::Bool: fn(bool{}); return true;
    case ScalarType::UInt8: fn(uint8_t{}); return true;
    case ScalarType::Int8: fn(int8_t{}); return true;
    default: return dispatch_real(t, fn);
  }
}

// Reads one element. A bool is read as a byte and normalised: memory from a
// corrupt program may hold any byte, and loading a bool that is not 0 or 1 is
// undefined behaviour.
template <typename T>
inline T load(const T* p) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b;
    std::memcpy(&b, p, 1);
    return b != 0;
  } else {
    return *p;
  }
}

// Two's-complement wrap-around a + b for integer T (no signed-overflow UB); plain + otherwise.
template <typename T>
inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  } else {
    return a + b;
  }
}

// Converts a double to T without undefined behaviour: NaN and out-of-range
// values saturate for integer T.
template <typename T>
T saturate_cast(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Converts one element between dtypes as PyTorch's casts do, minus the UB:
// float -> integer saturates (NaN -> 0), anything -> bool is `!= 0`.
template <typename U, typename T>
U convert(T v) {
  if constexpr (std::is_same_v<U, bool>) {
    return v != T(0);
  } else if constexpr (std::is_floating_point_v<T> && std::is_integral_v<U>) {
    return saturate_cast<U>(static_cast<double>(v));
  } else {
    return static_cast<U>(v);
  }
}

}  // namespace kernels
}  // namespace kiln
