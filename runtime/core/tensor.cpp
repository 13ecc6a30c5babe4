// Tensor views, dtype names and sizes.
#include "kiln/tensor.h"

#include <cstring>
#include <limits>
#include <string>

namespace kiln {

size_t element_size(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Float32: return 4;
    case ScalarType::Float64: return 8;
    case ScalarType::Int64: return 8;
    case ScalarType::Int32: return 4;
    case ScalarType::Bool: return 1;
    case ScalarType::Float16: return 2;
    case ScalarType::BFloat16: return 2;
    case ScalarType::UInt8: return 1;
    case ScalarType::Int8: return 1;
  }
  return 0;
}

namespace {
constexpr const char* kScalarTypeNames[kNumScalarTypes] = {"f32", "f64",  "i64", "i32", "bool",
                                                           "f16", "bf16", "u8",  "i8"};
}

const char* scalar_type_name(ScalarType t) noexcept {
  auto i = static_cast<int>(t);
  return (i >= 0 && i < kNumScalarTypes) ? kScalarTypeNames[i] : "invalid";
}

bool parse_scalar_type(const char* name, ScalarType* out) noexcept {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (std::strcmp(name, kScalarTypeNames[i]) == 0) {
      *out = static_cast<ScalarType>(i);
      return true;
    }
  }
  return false;
}

Tensor Tensor::view(void* data, Span<const int64_t> sizes, ScalarType dtype) noexcept {
  Tensor t;
  t.reset(data, sizes, dtype, 0);
  t.capacity_ = t.nbytes();
  return t;
}

int64_t Tensor::numel() const noexcept {
  int64_t n = 1;
  for (int i = 0; i < dim_; ++i) n *= sizes_[i];
  return n;
}

Status Tensor::resize(Span<const int64_t> sizes) noexcept {
  KILN_CHECK_OR_RETURN(sizes.size() <= static_cast<size_t>(kMaxDims), KernelFailure,
                       "cannot resize to %zu dims (at most %d)", sizes.size(), kMaxDims);
  // Sizes come from kernels computing on untrusted shapes. The product of the
  // non-zero sizes must stay below 2^62 even when a zero makes the tensor
  // empty, so that numel() and kernels never overflow multiplying them.
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  uint64_t bytes = element_size(dtype_);
  bool zero = false;
  for (int64_t s : sizes) {
    KILN_CHECK_OR_RETURN(s >= 0, KernelFailure, "negative size in %s", describe_sizes(sizes).c_str());
    if (s == 0) {
      zero = true;
      continue;
    }
    KILN_CHECK_OR_RETURN(bytes <= kLimit / static_cast<uint64_t>(s), KernelFailure, "sizes %s are too large",
                         describe_sizes(sizes).c_str());
    bytes *= static_cast<uint64_t>(s);
  }
  if (zero) bytes = 0;
  KILN_CHECK_OR_RETURN(bytes <= capacity_, KernelFailure,
                       "output %s %s needs %llu bytes but its planned buffer holds %zu", scalar_type_name(dtype_),
                       describe_sizes(sizes).c_str(), static_cast<unsigned long long>(bytes), capacity_);
  dim_ = static_cast<int8_t>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) sizes_[i] = sizes[i];
  return Status::ok();
}

void Tensor::reset(void* data, Span<const int64_t> sizes, ScalarType dtype, size_t capacity) noexcept {
  data_ = data;
  dtype_ = dtype;
  capacity_ = capacity;
  size_t n = sizes.size() < static_cast<size_t>(kMaxDims) ? sizes.size() : kMaxDims;
  dim_ = static_cast<int8_t>(n);
  for (size_t i = 0; i < n; ++i) sizes_[i] = sizes[i];
}

std::string describe_sizes(Span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

std::string describe(const Tensor& t) { return std::string(scalar_type_name(t.dtype())) + describe_sizes(t.sizes()); }

}  // namespace kiln
