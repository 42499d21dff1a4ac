// The shape of a tensor: up to 8 dimensions, stored inline.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace cnn {

// The largest element count of a tensor: 2^60, so that the byte size of any dtype (at most 8 bytes
// an element) also fits in int64. Shapes read from files are checked against it before anything is
// allocated: a header's sizes whose product wraps around would otherwise pass size checks.
constexpr int64_t kMaxElements = int64_t{1} << 60;

// The number of elements of `dims`; nothing when a size is negative or the product exceeds
// kMaxElements (checked without overflowing; a zero size makes it 0 whatever the others are).
std::optional<int64_t> element_count(const std::vector<int64_t>& dims);

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  std::string str() const;  // "[2, 3, 4]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

}  // namespace cnn
