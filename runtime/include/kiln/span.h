// Span<T>: a non-owning view of contiguous elements (C++17 has no std::span).
//
// No constructor from a braced list: `Span<const int64_t> s = {1, 2};` would point at an array
// that dies at the end of the statement. Functions that callers like to call with a braced list
// (Tensor::view, Tensor::resize, Method::run) have std::initializer_list overloads instead, whose
// list lives as long as the call.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace kiln {

template <typename T>
class Span {
 public:
  constexpr Span() noexcept = default;
  constexpr Span(T* data, size_t size) noexcept : data_(data), size_(size) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  Span(const std::vector<U>& v) noexcept : data_(v.data()), size_(v.size()) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  Span(std::vector<U>& v) noexcept : data_(v.data()), size_(v.size()) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T& operator[](size_t i) const noexcept { return data_[i]; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
