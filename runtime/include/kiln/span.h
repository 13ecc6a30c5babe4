// Span<T>: a non-owning view of contiguous elements (C++17 has no std::span).
#pragma once

#include <cstddef>
#include <initializer_list>
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
  constexpr Span(std::initializer_list<std::remove_const_t<T>> list) noexcept
      : data_(list.begin()), size_(list.size()) {}

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
