// ScalarType and Tensor: a dense, contiguous tensor view that never owns its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "kiln/api.h"
#include "kiln/error.h"
#include "kiln/span.h"

namespace kiln {

// Values are part of the file format (schema/program.fbs ScalarType).
enum class ScalarType : int8_t {
  Float32 = 0,
  Float64 = 1,
  Int64 = 2,
  Int32 = 3,
  Bool = 4,
  Float16 = 5,
  BFloat16 = 6,
  UInt8 = 7,
  Int8 = 8,
};
constexpr int kNumScalarTypes = 9;

// Bytes per element; 0 for a value outside the enum.
KILN_API size_t element_size(ScalarType t) noexcept;
// Short name used in kernel keys and messages: "f32", "i64", "bool", ...
KILN_API const char* scalar_type_name(ScalarType t) noexcept;
// Inverse of scalar_type_name; false if `name` is unknown.
KILN_API bool parse_scalar_type(const char* name, ScalarType* out) noexcept;

template <typename T>
struct CppTypeToScalar;
template <>
struct CppTypeToScalar<float> {
  static constexpr ScalarType value = ScalarType::Float32;
};
template <>
struct CppTypeToScalar<double> {
  static constexpr ScalarType value = ScalarType::Float64;
};
template <>
struct CppTypeToScalar<int64_t> {
  static constexpr ScalarType value = ScalarType::Int64;
};
template <>
struct CppTypeToScalar<int32_t> {
  static constexpr ScalarType value = ScalarType::Int32;
};
template <>
struct CppTypeToScalar<bool> {
  static constexpr ScalarType value = ScalarType::Bool;
};
template <>
struct CppTypeToScalar<uint8_t> {
  static constexpr ScalarType value = ScalarType::UInt8;
};
template <>
struct CppTypeToScalar<int8_t> {
  static constexpr ScalarType value = ScalarType::Int8;
};

// A tensor never has more dimensions than this; the loader rejects programs that do.
constexpr int kMaxDims = 8;

// A contiguous (row-major) tensor. Sizes are stored inline so that binding
// inputs and resizing outputs never allocate. `capacity` is the number of bytes
// the data pointer may hold: kernels may resize a tensor within it (dynamic
// shapes), never beyond.
class KILN_API Tensor {
 public:
  Tensor() noexcept = default;

  // A view of caller-owned memory; the caller keeps `data` alive while it is used.
  static Tensor view(void* data, Span<const int64_t> sizes, ScalarType dtype = ScalarType::Float32) noexcept;
  static Tensor view(const void* data, Span<const int64_t> sizes, ScalarType dtype = ScalarType::Float32) noexcept {
    return view(const_cast<void*>(data), sizes, dtype);
  }
  static Tensor view(void* data, std::initializer_list<int64_t> sizes,
                     ScalarType dtype = ScalarType::Float32) noexcept {
    return view(data, Span<const int64_t>(sizes.begin(), sizes.size()), dtype);
  }
  static Tensor view(const void* data, std::initializer_list<int64_t> sizes,
                     ScalarType dtype = ScalarType::Float32) noexcept {
    return view(const_cast<void*>(data), Span<const int64_t>(sizes.begin(), sizes.size()), dtype);
  }

  ScalarType dtype() const noexcept { return dtype_; }
  int dim() const noexcept { return dim_; }
  Span<const int64_t> sizes() const noexcept { return {sizes_, static_cast<size_t>(dim_)}; }
  // Size of dimension `d`; negative `d` counts from the end. Precondition: in range.
  int64_t size(int d) const noexcept { return sizes_[d < 0 ? d + dim_ : d]; }
  int64_t numel() const noexcept;
  size_t nbytes() const noexcept { return static_cast<size_t>(numel()) * element_size(dtype_); }
  size_t capacity() const noexcept { return capacity_; }

  void* data() const noexcept { return data_; }
  template <typename T>
  T* data_as() const noexcept {
    return static_cast<T*>(data_);
  }

  // Sets new sizes; fails if there are too many dims, a negative size, or the
  // result would not fit in capacity(). Never allocates.
  Status resize(Span<const int64_t> sizes) noexcept;
  Status resize(std::initializer_list<int64_t> sizes) noexcept {
    return resize(Span<const int64_t>(sizes.begin(), sizes.size()));
  }
  // Sets sizes and data without a capacity check; for the runtime when binding.
  void reset(void* data, Span<const int64_t> sizes, ScalarType dtype, size_t capacity) noexcept;

  // True for tensors whose bytes come from the program's constant segments;
  // a kernel may prepack such a tensor once at method load.
  bool is_constant() const noexcept { return constant_; }
  void set_constant(bool c) noexcept { constant_ = c; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
  int64_t sizes_[kMaxDims] = {};
  int8_t dim_ = 0;
  ScalarType dtype_ = ScalarType::Float32;
  bool constant_ = false;
};

// "f32[2, 3]"
KILN_API std::string describe(const Tensor& t);
// "[2, 3]"
KILN_API std::string describe_sizes(Span<const int64_t> sizes);

}  // namespace kiln
