#include "engine/shape.h"

#include "engine/error.h"

namespace cnn {

std::optional<int64_t> element_count(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) return std::nullopt;
  for (int64_t d : dims)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) return std::nullopt;
  return n;
}

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  CNN_CHECK(dims.size() <= kMaxDims, "a tensor has at most ", kMaxDims, " dimensions, got ", dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    CNN_CHECK(dims[i] >= 0, "negative dimension ", dims[i], " at axis ", i, " of a shape");
    dims_[i] = dims[i];
  }
  rank_ = static_cast<int>(dims.size());
  CNN_CHECK(element_count(dims).has_value(), "shape ", str(), " has more elements than a tensor can hold (2^60)");
}

int64_t Shape::numel() const {
  // A zero anywhere makes the product 0; multiplying in order first could overflow ([2^40, 2^40, 0]).
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[static_cast<size_t>(i)]);
  return s + "]";
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != other.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

}  // namespace cnn
