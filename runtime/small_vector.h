// SmallVec: a vector of trivially copyable values that keeps its first N elements inline.
//
// Shapes and strides are built and copied on every op that is recorded, so they must not touch
// the heap in the common case (rank <= 6). Beyond N elements it spills to the heap and behaves
// like std::vector.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <span>
#include <type_traits>

namespace loom {

template <typename T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds plain values only");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() noexcept {}
  explicit SmallVec(size_t n, T value = T()) { resize(n, value); }
  SmallVec(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <typename It>
  SmallVec(It first, It last) {
    assign(first, last);
  }
  SmallVec(std::span<const T> values) { assign(values.begin(), values.end()); }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { steal(o); }
  ~SmallVec() { free_heap(); }

  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      free_heap();
      steal(o);
    }
    return *this;
  }

  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data_[size_++] = static_cast<T>(*first);
  }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }
  operator std::span<const T>() const noexcept { return {data_, size_}; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = std::max(n, capacity_ * 2);
    T* heap = static_cast<T*>(std::malloc(cap * sizeof(T)));
    if (!heap) throw std::bad_alloc();
    if (size_) std::memcpy(heap, data_, size_ * sizeof(T));
    free_heap();
    data_ = heap;
    capacity_ = cap;
  }
  void push_back(T v) {
    if (size_ == capacity_) reserve(size_ + 1);
    data_[size_++] = v;
  }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void insert(size_t pos, T v) {
    reserve(size_ + 1);
    std::memmove(data_ + pos + 1, data_ + pos, (size_ - pos) * sizeof(T));
    data_[pos] = v;
    ++size_;
  }
  void erase(size_t pos) noexcept {
    std::memmove(data_ + pos, data_ + pos + 1, (size_ - pos - 1) * sizeof(T));
    --size_;
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void free_heap() noexcept {
    if (on_heap()) std::free(data_);
    data_ = inline_;
    capacity_ = N;
  }
  void steal(SmallVec& o) noexcept {
    if (o.on_heap()) {
      data_ = o.data_;
      capacity_ = o.capacity_;
    } else {
      data_ = inline_;
      capacity_ = N;
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    }
    size_ = o.size_;
    o.data_ = o.inline_;
    o.capacity_ = N;
    o.size_ = 0;
  }

  T* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = N;
  // Uninitialized until written, as a std::vector's spare capacity: a T with default member
  // initializers (InputMeta, which every recorded op fills a SmallVec of) would otherwise be
  // constructed N times per SmallVec for nothing.
  union {
    T inline_[N];
  };
};

}  // namespace loom
