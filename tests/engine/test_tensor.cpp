// Tensor runtime: creation, views, copies, conversion, random draws, printing, device errors.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "engine/cnn.h"

using namespace cnn;

TEST_CASE("tensors are created with shape, dtype and values") {
  Tensor z = Tensor::zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.numel() == 6);
  CHECK(z.dtype() == DType::f32);
  CHECK(z.device() == Device::cpu());
  for (double v : z.to_doubles()) CHECK(v == 0.0);
  Tensor f = Tensor::full({4}, 2.5, DType::f16);
  for (double v : f.to_doubles()) CHECK(v == 2.5);
  Tensor o = Tensor::ones({3}, DType::i64);
  CHECK(o.data_as<int64_t>()[2] == 1);
  CHECK(reinterpret_cast<uintptr_t>(Tensor::empty({7}).data()) % 64 == 0);  // 64-byte aligned
  CHECK_THROWS_AS(o.data_as<float>(), Error);
}

TEST_CASE("a shape whose element count overflows is refused, zero-size shapes stay fine") {
  CHECK_THROWS_WITH_AS(Shape({int64_t{1} << 32, 1, 1 << 16, 1 << 16}), doctest::Contains("more elements than a tensor can hold"),
                       Error);
  CHECK_THROWS_AS(Tensor::empty({int64_t{1} << 31, int64_t{1} << 31}), Error);
  CHECK(element_count({int64_t{1} << 40, 0, int64_t{1} << 40}) == 0);
  // Multiplied in order, 2^40 * 2^40 overflows before the 0 (undefined behaviour, which UBSan reports).
  CHECK(Shape({int64_t{1} << 40, int64_t{1} << 40, 0}).numel() == 0);
  CHECK(element_count({int64_t{1} << 30, int64_t{1} << 30}) == kMaxElements);
  CHECK_FALSE(element_count({int64_t{1} << 30, (int64_t{1} << 30) + 1}).has_value());
  CHECK_FALSE(element_count({3, -1}).has_value());
}

TEST_CASE("reshape and slice are views of the same memory") {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor r = t.reshape({3, -1});
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.data() == t.data());
  Tensor s = t.slice(1, 2);
  CHECK(s.shape() == Shape{1, 3});
  CHECK(s.to_doubles() == std::vector<double>{3, 4, 5});
  s.fill_(9);
  CHECK(t.to_doubles() == std::vector<double>{0, 1, 2, 9, 9, 9});
  CHECK_THROWS_WITH_AS(t.reshape({4, 2}), doctest::Contains("6 elements cannot become 8"), Error);
  CHECK_THROWS_AS(t.slice(1, 3), Error);
}

TEST_CASE("from_blob wraps caller memory without owning it") {
  std::vector<double> host = {1, 2, 3, 4};
  {
    Tensor t = Tensor::from_blob(host.data(), {2, 2}, DType::f64);
    t.fill_(7);
    CHECK(t.data() == host.data());
  }
  CHECK(host == std::vector<double>{7, 7, 7, 7});  // still ours, and written through
}

TEST_CASE("clone, copy_ and dtype conversion") {
  Tensor a = Tensor::from_vector<float>({1.5f, -2.25f, 3.0f}, {3});
  Tensor b = a.clone();
  CHECK(b.data() != a.data());
  CHECK(b.to_doubles() == a.to_doubles());
  Tensor h = a.to(DType::f16);
  CHECK(h.dtype() == DType::f16);
  CHECK(h.to_doubles() == std::vector<double>{1.5, -2.25, 3.0});
  Tensor i = a.to(DType::i32);
  CHECK(i.data_as<int32_t>()[1] == -2);
  Tensor c = Tensor::zeros({3});
  c.copy_(a);
  CHECK(c.to_doubles() == a.to_doubles());
  CHECK_THROWS_WITH_AS(c.copy_(h), doctest::Contains("shapes and dtypes must match"), Error);
  CHECK(Tensor::from_vector<double>({4.0}, {}).item() == 4.0);
}

TEST_CASE("random tensors are reproducible per seed and have the right moments") {
  Tensor a = Tensor::randn({10000}, 42);
  Tensor b = Tensor::randn({10000}, 42);
  Tensor c = Tensor::randn({10000}, 43);
  CHECK(a.to_doubles() == b.to_doubles());
  CHECK(a.to_doubles() != c.to_doubles());
  const std::vector<double> v = a.to_doubles();
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  CHECK(std::fabs(mean) < 0.03);
  CHECK(std::fabs(var - 1.0) < 0.05);
  Tensor u = Tensor::uniform({10000}, 2.0, 3.0, 7);
  for (double x : u.to_doubles()) {
    CHECK(x >= 2.0);
    CHECK(x < 3.0);
  }
  // An element's value depends on (seed, index) only, not on the tensor's size.
  CHECK(Tensor::randn({5}, 42).to_doubles()[3] == doctest::Approx(v[3]).epsilon(1e-7));
}

TEST_CASE("printing shows shape, dtype, device and elides long tensors") {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const std::string s = t.str();
  CHECK(s.find("[[1, 2],") != std::string::npos);
  CHECK(s.find("shape=[2, 2], dtype=f32, device=cpu") != std::string::npos);
  const std::string big = Tensor::zeros({100, 100}).str();
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.size() < 600);
}

TEST_CASE("devices parse, a CUDA tensor without a usable GPU is a clear error") {
  CHECK(Device::parse("cuda:1") == Device::cuda(1));
  CHECK(Device::parse("cpu").is_cpu());
  CHECK_THROWS_WITH_AS(Device::parse("gpu"), doctest::Contains("use cpu, cuda or cuda:N"), Error);
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::cuda(0)), doctest::Contains("use device = cpu"), Error);
  } else {
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::cuda(cuda::device_count())),
                         doctest::Contains("CUDA device(s)"), Error);
  }
}
