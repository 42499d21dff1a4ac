// Bad arguments to ops are cnn::Errors that name the op and the shapes, dtypes or devices involved.
#include <doctest/doctest.h>

#include "engine/cnn.h"

using namespace cnn;

TEST_CASE("mismatched shapes name the op and both shapes") {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 3});
  CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("shapes [2, 3] and [4, 3] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("matmul: inner dimensions differ: [2, 3] f32 cpu x [4, 3] f32 cpu"),
                       Error);
  CHECK_THROWS_WITH_AS(linear(a, Tensor::zeros({5, 4})), doctest::Contains("linear: input [2, 3] f32 cpu"), Error);
}

TEST_CASE("mismatched dtypes and devices are refused with advice") {
  const Tensor a = Tensor::zeros({2}), h = Tensor::zeros({2}, DType::f16);
  CHECK_THROWS_WITH_AS(mul(a, h), doctest::Contains("mul: inputs of different dtypes: [2] f32 cpu and [2] f16 cpu"), Error);
  CHECK_THROWS_WITH_AS(relu(Tensor::zeros({2}, DType::i32)), doctest::Contains("relu: needs a floating tensor"), Error);
}

TEST_CASE("unsupported broadcast patterns are explained") {
  CHECK_THROWS_WITH_AS(add(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 1})),
                       doctest::Contains("not adjacent"), Error);
}

TEST_CASE("cross_entropy validates labels") {
  const Tensor logits = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 3}, {2})),
                       doctest::Contains("label 3 of row 1 is outside [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1}, {2})),
                       doctest::Contains("labels must be i64 [2]"), Error);
  CHECK_THROWS_AS(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1}, {2}), 1.5), Error);
}

TEST_CASE("reductions check their axes") {
  CHECK_THROWS_WITH_AS(sum(Tensor::zeros({2, 3}), {2}), doctest::Contains("sum: axis 2 out of range"), Error);
}
