// Writes the binary seed inputs of corpus/ with cnn's own writers (save_hdf5, save_safetensors,
// encode_image) and the formats' byte layouts, so that every seed is a small valid
// file that the reader accepts. Built in fuzz builds as fuzz_make_seeds; run it with the corpus
// folder to regenerate those seeds (the INI seeds are copies of configs/ files, written by hand).
//   fuzz_make_seeds tests/fuzz/corpus
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/encode.h"
#include "engine/io/hdf5.h"
#include "engine/io/safetensors.h"

namespace fs = std::filesystem;
using namespace cnn;
using Bytes = std::vector<uint8_t>;

namespace {
fs::path root;

void write_file(const fs::path& path, const Bytes& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

// A seed: corpus/<harness>/<name>.
void write(const std::string& relative, const Bytes& bytes) { write_file(root / relative, bytes); }

Bytes read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A harness whose first byte picks options gets it in front of the file.
Bytes with_option(uint8_t option, Bytes file) {
  file.insert(file.begin(), option);
  return file;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

data::Image pattern(int h, int w, int c) {
  data::Image image(h, w, c);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 37 + 11);
  return image;
}

// A tensor of small distinct byte values (any dtype: only its bytes matter to the readers).
Tensor counting(Shape shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i % 61);
  return t;
}

Bytes idx(const std::vector<int>& dims, Bytes values) {
  Bytes out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

Bytes gzip(const Bytes& bytes, const fs::path& scratch) {
  gzFile f = gzopen(scratch.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return read(scratch);
}

Bytes cifar_record(Bytes labels) {
  for (int i = 0; i < 3 * 1024; ++i) labels.push_back(static_cast<uint8_t>(i % 251));
  return labels;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_FOLDER\n", argv[0]);
    return 2;
  }
  root = argv[1];
  const fs::path scratch = fs::temp_directory_path() / "cnn-fuzz-seeds";
  fs::create_directories(scratch);

  write("fuzz_idx/images", idx({2, 3, 3}, Bytes(18, 9)));
  write("fuzz_idx/labels", idx({4}, {0, 3, 9, 1}));
  write("fuzz_idx/images.gz", gzip(idx({2, 4, 4}, Bytes(32, 200)), scratch / "idx.gz"));

  write("fuzz_cifar/cifar10_one_record", cifar_record({2}));                     // even first byte: CIFAR-10
  write("fuzz_cifar/cifar100_one_record", cifar_record({3, 42}));                // odd: CIFAR-100, fine label 42
  Bytes two = cifar_record({0});
  const Bytes second = cifar_record({9});
  two.insert(two.end(), second.begin(), second.end());
  write("fuzz_cifar/cifar10_two_records", two);

  // Options byte (fuzz_list_file.cpp): bits 0-1 the header (0 detected, 1 yes, 2 no), bit 2 class
  // names {cat, dog, 7} given.
  write("fuzz_list_file/names_with_header", with_option(0, text("path,label\na.png,cat\nsub/b.jpg,dog\n")));
  write("fuzz_list_file/indices", with_option(2, text("a.png,0\r\n# comment\nsub/b.jpg,3\n")));
  write("fuzz_list_file/quoted_given_names", with_option(4 + 1, text("file,class\n\"a.png\",7\nsub/b.jpg,cat\n")));

  io::save_safetensors(scratch / "two.safetensors",
                       {{"conv.weight", counting({2, 3, 3, 1}, DType::f32)}, {"fc.bias", counting({4}, DType::f16)}},
                       {{"format", "pt"}});
  write("fuzz_safetensors/two_tensors", read(scratch / "two.safetensors"));
  io::save_safetensors(scratch / "ints.safetensors",
                       {{"step", counting({1}, DType::i64)}, {"mask", counting({2, 2}, DType::u8)},
                        {"bf", counting({3}, DType::bf16)}});
  write("fuzz_safetensors/int_and_bf16", read(scratch / "ints.safetensors"));

  io::TensorFile checkpoint;
  checkpoint.tensors = {{"model.conv.weight", counting({2, 3, 3, 1}, DType::f32)},
                        {"optim/state.momentum", counting({4}, DType::f16)},
                        {"step_counts", counting({2}, DType::i64)}};
  checkpoint.attributes = {{"epoch", int64_t{3}},
                           {"rng", uint64_t{12345678901234ull}},
                           {"lr", 0.05},
                           {"config", std::string("[optim]\nlr = 0.05\n")},
                           {"class_names", std::vector<std::string>{"cat", "dog"}}};
  io::save_hdf5(scratch / "checkpoint.h5", checkpoint);
  write("fuzz_hdf5/checkpoint", read(scratch / "checkpoint.h5"));

  const Bytes png = data::encode_image(pattern(4, 4, 3), data::ImageFormat::png);
  const Bytes jpeg = data::encode_image(pattern(8, 8, 3), data::ImageFormat::jpeg, 50);
  write("fuzz_decode/png_rgb", with_option(0, png));                       // 3 channels, full size
  write("fuzz_decode/png_gray_alpha", with_option(1, data::encode_image(pattern(3, 5, 1), data::ImageFormat::png)));
  write("fuzz_decode/jpeg_rgb", with_option(2, jpeg));                     // 3 channels, min side 4
  write("fuzz_decode/jpeg_gray", with_option(1, data::encode_image(pattern(8, 8, 1), data::ImageFormat::jpeg, 50)));
  write("fuzz_decode/jpeg_cmyk", with_option(0, data::encode_image(pattern(8, 8, 3), data::ImageFormat::jpeg, 50, true)));
  write("fuzz_decode/bmp", with_option(0, data::encode_image(pattern(2, 3, 3), data::ImageFormat::bmp)));

  // fuzz_packed builds its files from the input's bytes (FuzzedDataProvider): any bytes are a seed.
  Bytes counting_bytes(96), high_bytes(96, 0xA7);
  for (size_t i = 0; i < counting_bytes.size(); ++i) counting_bytes[i] = static_cast<uint8_t>(i * 11);
  write("fuzz_packed/counting", counting_bytes);
  write("fuzz_packed/high", high_bytes);
  fs::remove_all(scratch);
  return 0;
}
