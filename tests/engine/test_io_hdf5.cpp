// HDF5 tensor files (engine/io/hdf5.h): bitwise round trips of every dtype and shape, metadata
// attributes of every kind, file order, errors that name the file and the problem, and atomic
// replacement (an interrupted save leaves the previous file loadable).
#include <doctest/doctest.h>

#include <fstream>

#include "engine/io/atomic_file.h"
#include "engine/io/hdf5.h"
#include "test_io_support.h"

using namespace cnn;
using namespace cnn::io;
using io_test::ScratchDir;

namespace {
TensorFile sample_file() {
  TensorFile f;
  f.tensors = io_test::every_dtype_tensors();
  f.attributes["epoch"] = int64_t{-3};
  f.attributes["rng_state"] = uint64_t{0xFEDCBA9876543210ull};
  f.attributes["best_top1"] = 0.7612345678901234;
  f.attributes["config"] = std::string("[optim]\nname = sgd\nlr = 0.1\n; ünïcödé\n");
  f.attributes["class_names"] = std::vector<std::string>{"cat", "dog", "", "T-shirt/top"};
  f.attributes["no_names"] = std::vector<std::string>{};
  return f;
}
}  // namespace

TEST_CASE("HDF5 files round-trip every dtype bitwise, in order, with their metadata") {
  ScratchDir dir("hdf5_round_trip");
  const TensorFile written = sample_file();
  save_hdf5(dir / "weights.h5", written);
  const TensorFile read = load_hdf5(dir / "weights.h5");
  io_test::check_same_tensors(read.tensors, written.tensors);
  CHECK(read.attributes == written.attributes);
  CHECK(read.integer("epoch") == -3);
  CHECK(read.unsigned_integer("rng_state") == 0xFEDCBA9876543210ull);
  CHECK(read.real("best_top1") == 0.7612345678901234);
  CHECK(read.texts("class_names").at(3) == "T-shirt/top");
  CHECK(read.tensor("layer1.0.bf16.bias").dtype() == DType::bf16);
  CHECK(read.tensor("scalar").shape() == Shape{});
  CHECK(read.tensor("empty").shape() == Shape{0, 4});
  CHECK_FALSE(std::filesystem::exists(temporary_path(dir / "weights.h5")));
}

TEST_CASE("HDF5 tensor names with '/' become groups and read back under the same names") {
  ScratchDir dir("hdf5_groups");
  TensorFile f;
  f.tensors.emplace_back("model/fc.weight", io_test::random_bits({4, 3}, DType::f32, 5));
  f.tensors.emplace_back("optimizer/fc.weight.momentum", io_test::random_bits({4, 3}, DType::f32, 6));
  f.tensors.emplace_back("step_counts", io_test::random_bits({2}, DType::i64, 7));
  save_hdf5(dir / "nested.h5", f);
  const TensorFile read = load_hdf5(dir / "nested.h5");
  io_test::check_same_tensors(read.tensors, f.tensors);
}

TEST_CASE("HDF5 f16 and bf16 values keep their meaning, not just their bits") {
  ScratchDir dir("hdf5_half");
  const Tensor values = Tensor::from_vector<float>({1.0f, -2.5f, 65504.0f, 3.0e-5f, 1.0e20f}, {5});
  TensorFile f;
  f.tensors.emplace_back("half", values.slice(0, 4).to(DType::f16));
  f.tensors.emplace_back("brain", values.to(DType::bf16));
  save_hdf5(dir / "half.h5", f);
  const TensorFile read = load_hdf5(dir / "half.h5");
  CHECK(read.tensor("half").to_doubles() == f.tensors[0].second.to_doubles());
  CHECK(read.tensor("brain").to_doubles() == f.tensors[1].second.to_doubles());
  CHECK(read.tensor("brain").to_doubles()[4] == doctest::Approx(1.0e20).epsilon(0.01));
}

TEST_CASE("HDF5 loading errors name the file and the problem") {
  ScratchDir dir("hdf5_errors");
  CHECK_THROWS_WITH_AS(load_hdf5(dir / "missing.h5"),
                       doctest::Contains("missing.h5' does not exist"), Error);
  {
    std::ofstream(dir / "text.h5") << "this is not an HDF5 file\n";
  }
  CHECK_THROWS_WITH_AS(load_hdf5(dir / "text.h5"), doctest::Contains("text.h5': is not an HDF5 file"), Error);

  save_hdf5(dir / "good.h5", sample_file());
  const auto size = std::filesystem::file_size(dir / "good.h5");
  for (const auto keep : {size / 2, size - 16}) {
    std::filesystem::copy_file(dir / "good.h5", dir / "cut.h5", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(dir / "cut.h5", keep);
    CHECK_THROWS_WITH_AS(load_hdf5(dir / "cut.h5"), doctest::Contains("cut.h5'"), Error);
  }

  const TensorFile good = load_hdf5(dir / "good.h5");
  CHECK_THROWS_WITH_AS(good.tensor("fc.weight"), doctest::Contains("'fc.weight' is not in HDF5 file"), Error);
  CHECK_THROWS_WITH_AS(good.integer("step"), doctest::Contains("attribute 'step' is missing"), Error);
  CHECK_THROWS_WITH_AS(good.integer("config"), doctest::Contains("'config' is not a signed integer"), Error);
}

TEST_CASE("HDF5 saving errors: bad names, duplicates, unwritable folders") {
  ScratchDir dir("hdf5_save_errors");
  TensorFile f;
  f.tensors.emplace_back("a", Tensor::zeros({2}));
  f.tensors.emplace_back("a", Tensor::zeros({2}));
  CHECK_THROWS_WITH_AS(save_hdf5(dir / "dup.h5", f), doctest::Contains("cannot create dataset 'a'"), Error);
  f.tensors.pop_back();
  f.tensors.emplace_back("/abs", Tensor::zeros({2}));
  CHECK_THROWS_WITH_AS(save_hdf5(dir / "bad.h5", f), doctest::Contains("'/abs' is not a valid dataset name"), Error);
  f.tensors.pop_back();
  CHECK_THROWS_WITH_AS(save_hdf5(dir / "no/such/folder/x.h5", f), doctest::Contains("cannot create the file"), Error);
  CHECK_FALSE(std::filesystem::exists(dir / "dup.h5"));
  CHECK_FALSE(std::filesystem::exists(temporary_path(dir / "dup.h5")));
}

TEST_CASE("an HDF5 save interrupted half way leaves the previous file loadable") {
  ScratchDir dir("hdf5_atomic");
  const std::filesystem::path path = dir / "last.h5";
  TensorFile first;
  first.tensors.emplace_back("w", Tensor::full({3}, 1.0));
  first.attributes["step"] = int64_t{100};
  save_hdf5(path, first);

  TensorFile second = sample_file();
  second.attributes["step"] = int64_t{200};
  int written = 0;
  struct Interrupted {};
  CHECK_THROWS_AS(save_hdf5(path, second,
                            [&](const std::string&) {
                              REQUIRE(std::filesystem::exists(temporary_path(path)));  // writing goes there
                              if (++written == 3) throw Interrupted{};
                            }),
                  Interrupted);
  CHECK(written == 3);
  CHECK_FALSE(std::filesystem::exists(temporary_path(path)));
  TensorFile read = load_hdf5(path);
  CHECK(read.integer("step") == 100);
  CHECK(read.tensor("w").to_doubles() == std::vector<double>{1, 1, 1});

  // A crash leaves a truncated temporary file behind: the real file is unaffected, and the next
  // save replaces both.
  save_hdf5(temporary_path(path), second);
  std::filesystem::resize_file(temporary_path(path), 100);
  CHECK(load_hdf5(path).integer("step") == 100);
  save_hdf5(path, second);
  CHECK(load_hdf5(path).integer("step") == 200);
  CHECK_FALSE(std::filesystem::exists(temporary_path(path)));
}
