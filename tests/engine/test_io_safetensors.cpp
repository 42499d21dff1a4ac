// safetensors files (engine/io/safetensors.h): bitwise round trips of every dtype, the exact byte
// layout of a small file, metadata, and errors for missing, truncated and malformed files.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "engine/io/atomic_file.h"
#include "engine/io/safetensors.h"
#include "test_io_support.h"

using namespace cnn;
using namespace cnn::io;
using io_test::ScratchDir;

namespace {
void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file made of a given header and data section.
std::string file_with_header(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}
}  // namespace

TEST_CASE("safetensors files round-trip every dtype bitwise, in order, with metadata") {
  ScratchDir dir("st_round_trip");
  const NamedTensors written = io_test::every_dtype_tensors();
  save_safetensors(dir / "model.safetensors", written, {{"format", "pt"}, {"classes", "10"}});
  const SafetensorsFile read = load_safetensors(dir / "model.safetensors");
  io_test::check_same_tensors(read.tensors, written);
  CHECK(read.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"classes", "10"}});
  CHECK_FALSE(std::filesystem::exists(temporary_path(dir / "model.safetensors")));
}

TEST_CASE("safetensors byte layout: length, padded JSON header, raw little-endian data") {
  ScratchDir dir("st_layout");
  const Tensor a = Tensor::from_vector<float>({1.0f, 2.0f}, {2, 1});
  const Tensor b = Tensor::from_vector<int64_t>({-1}, {1});
  save_safetensors(dir / "ab.safetensors", {{"b_first", b}, {"a", a}});
  const std::string bytes = io_test::read_file(dir / "ab.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);
  const std::string header = bytes.substr(8, n);
  // Keys in sorted order: the checksum metadata ("__metadata__" sorts first), then the tensors.
  CHECK(header.rfind(R"({"__metadata__":{"cnn.crc32c":"{\"__metadata__\":\"00000000\",\"a\":\")", 0) == 0);
  CHECK(header.find(R"("a":{"data_offsets":[8,16],"dtype":"F32","shape":[2,1]},)"
                    R"("b_first":{"data_offsets":[0,8],"dtype":"I64","shape":[1]}})") != std::string::npos);
  CHECK(bytes.size() == 8 + n + 16);
  const std::string data = bytes.substr(8 + n);
  CHECK(data.substr(0, 8) == std::string(8, '\xff'));                   // -1 as i64
  CHECK(data.substr(8, 4) == std::string("\x00\x00\x80\x3f", 4));        // 1.0f
  CHECK(data.substr(12, 4) == std::string("\x00\x00\x00\x40", 4));       // 2.0f
  const SafetensorsFile read = load_safetensors(dir / "ab.safetensors");
  CHECK(read.tensors[0].first == "b_first");  // data order, not header order
}

TEST_CASE("safetensors errors name the file and the problem") {
  ScratchDir dir("st_errors");
  const auto p = [&](const char* name) { return dir / name; };
  CHECK_THROWS_WITH_AS(load_safetensors(p("missing.safetensors")), doctest::Contains("missing.safetensors': does not exist"),
                       Error);
  write_bytes(p("short"), "abc");
  CHECK_THROWS_WITH_AS(load_safetensors(p("short")), doctest::Contains("/short': is 3 bytes long"), Error);

  save_safetensors(p("good"), io_test::every_dtype_tensors());
  const std::string good = io_test::read_file(p("good"));
  write_bytes(p("cut_data"), good.substr(0, good.size() - 3));
  CHECK_THROWS_WITH_AS(load_safetensors(p("cut_data")), doctest::Contains("(truncated?)"), Error);
  write_bytes(p("cut_header"), good.substr(0, 40));
  CHECK_THROWS_WITH_AS(load_safetensors(p("cut_header")), doctest::Contains("exceeds the file's 32 remaining bytes"),
                       Error);

  const std::string four_floats(16, '\0');
  const struct {
    const char* header;
    const char* message;
  } bad[] = {
      {"{not json", "the header is not valid JSON"},
      {"[1, 2]", "the header is not a JSON object"},
      {R"({"w":{"dtype":"F32","shape":[4]}})", "bad header entry for tensor 'w'"},
      {R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,16]}})", "dtype 'F8_E4M3'"},
      {R"({"w":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", "do not span the 5 elements"},
      {R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", "non-negative integer"},
      // Sizes whose product wraps around to 0 in 64 bits must not pass as an empty tensor.
      {R"({"w":{"dtype":"F32","shape":[4294967296,1,65536,65536],"data_offsets":[0,0]}})",
       "more elements than a tensor can hold"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       "overlapping or gapped"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "8 bytes follow the last tensor"},
      {R"({"__metadata__":{"epoch":3},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "metadata 'epoch' is not a string"},
  };
  for (const auto& b : bad) {
    INFO(b.header);
    write_bytes(p("bad"), file_with_header(b.header, four_floats));
    CHECK_THROWS_WITH_AS(load_safetensors(p("bad")), doctest::Contains(b.message), Error);
  }
  write_bytes(p("ok"), file_with_header(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", four_floats));
  CHECK(load_safetensors(p("ok")).tensor("w").to_doubles() == std::vector<double>{0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(load_safetensors(p("ok")).tensor("v"), doctest::Contains("'v' is not in safetensors file"), Error);
}

TEST_CASE("safetensors saving refuses duplicate and reserved names and keeps the old file") {
  ScratchDir dir("st_save_errors");
  save_safetensors(dir / "w.safetensors", {{"w", Tensor::ones({2})}});
  CHECK_THROWS_WITH_AS(save_safetensors(dir / "w.safetensors", {{"w", Tensor::zeros({2})}, {"w", Tensor::zeros({2})}}),
                       doctest::Contains("'w' is empty, reserved or used twice"), Error);
  CHECK_THROWS_AS(save_safetensors(dir / "w.safetensors", {{"__metadata__", Tensor::zeros({2})}}), Error);
  CHECK(load_safetensors(dir / "w.safetensors").tensor("w").to_doubles() == std::vector<double>{1, 1});
}
