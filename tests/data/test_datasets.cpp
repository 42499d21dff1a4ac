// Datasets from fixtures written by the tests: IDX (raw and gzip), CIFAR-10/100 binary,
// ImageFolder trees and list files of encoded images, and the start-up errors of each.
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "data/cifar.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/idx.h"
#include "data/open_dataset.h"
#include "data/packed_dataset.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using cnn::data::test::TempDir;

namespace {
std::vector<uint8_t> idx_bytes(const std::vector<int>& dims, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// A CIFAR record: label byte(s), then R, G, B planes of 32x32.
void append_cifar_record(std::vector<uint8_t>& out, std::vector<uint8_t> labels, int seed) {
  out.insert(out.end(), labels.begin(), labels.end());
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; ++p) out.push_back(static_cast<uint8_t>(seed + c * 3 + p));
}
}  // namespace

TEST_CASE("an IDX header whose sizes multiply beyond what a tensor holds is refused, not read as empty") {
  TempDir dir;
  // 65536^4 = 2^64: wraps to 0 elements in 64-bit arithmetic.
  const std::string huge = dir.write("huge-idx3-ubyte", idx_bytes({65536, 65536, 65536, 65536}, {}));
  CHECK_THROWS_WITH_AS(read_idx(huge), doctest::Contains("header's sizes multiply beyond 2^60"), Error);
}

TEST_CASE("an IDX header that claims more data than the file can hold is refused before it is allocated") {
  TempDir dir;
  // 16 bytes claiming 2^32 bytes of data: refused from the file's size, without allocating 4 GiB.
  const std::string raw = dir.write("short-idx3-ubyte", idx_bytes({65536, 256, 256}, {1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(read_idx(raw), doctest::Contains("claims 4294967296 bytes of data, more than the file's 20 bytes hold"),
                       Error);
  // A gzip stream cannot inflate more than 1032-fold.
  const std::string gz = (dir.path() / "short-idx3-ubyte.gz").string();
  write_gzip(gz, idx_bytes({65536, 256, 256}, {1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(read_idx(gz), doctest::Contains("compressed bytes can inflate to"), Error);
  // Data that compresses well is still read whole.
  write_gzip(gz, idx_bytes({100, 100, 100}, std::vector<uint8_t>(1000000, 7)));
  CHECK(read_idx(gz).numel() == 1000000);
}

TEST_CASE("an IDX header with a zero size is refused at open, naming the file and the sizes") {
  // A [64, 0, 28] image file used to open as an empty-width dataset and trap later (SIGFPE) in the
  // resize's division by the width.
  TempDir dir;
  const std::string zero_width = dir.write("zero-idx3-ubyte", idx_bytes({64, 0, 28}, {}));
  const std::string m = test::error_message([&] { read_idx(zero_width); });
  CHECK(m.find(zero_width) != std::string::npos);
  CHECK(m.find("[64, 0, 28], one of them zero") != std::string::npos);
  const std::string no_labels = dir.write("none-idx1-ubyte", idx_bytes({0}, {}));
  CHECK(test::error_message([&] { read_idx(no_labels); }).find("[0], one of them zero") != std::string::npos);
  CHECK(read_idx(dir.write("one-idx3-ubyte", idx_bytes({1, 1, 1}, {9}))).numel() == 1);
}

TEST_CASE("a FIFO named like an image or a dataset file is refused at once, never opened for reading") {
  // open() of a FIFO blocks until a writer comes: a pipe.jpg in a class folder hung a loader worker
  // (and with it cnn_train, cnn_pack --check and cnn_infer) for ever.
  TempDir dir;
  const std::string pipe_jpg = test::make_fifo(dir, "cls/b/pipe.jpg");
  CHECK(test::returns_without_a_writer(pipe_jpg, [&] {
    CHECK_THROWS_WITH_AS(read_file_bytes(pipe_jpg), doctest::Contains("not a regular file (a FIFO (named pipe))"),
                         CorruptImageError);
  }));
  const std::string pipe_idx = test::make_fifo(dir, "train-images-idx3-ubyte");
  CHECK(test::returns_without_a_writer(pipe_idx, [&] {
    CHECK_THROWS_WITH_AS(read_idx(pipe_idx), doctest::Contains("is not a regular file but a FIFO (named pipe)"), Error);
  }));
  const std::string pipe_list = test::make_fifo(dir, "train.txt");
  CHECK(test::returns_without_a_writer(pipe_list, [&] {
    CHECK_THROWS_WITH_AS(open_list_file(pipe_list, {}), doctest::Contains("list file"), Error);
  }));
  const std::string pipe_h5 = test::make_fifo(dir, "packed.h5");
  CHECK(test::returns_without_a_writer(pipe_h5, [&] {
    CHECK_THROWS_WITH_AS(PackedDataset{pipe_h5}, doctest::Contains("is not a regular file but a FIFO"), Error);
  }));
  // Through an image folder, as the loader meets it: the FIFO is one more unreadable image.
  dir.write("cls/a/one.png", encode_image(test::pattern_image(4, 4, 3), ImageFormat::png));
  dir.write("cls/b/two.png", encode_image(test::pattern_image(4, 4, 3, 1), ImageFormat::png));
  const auto folder = open_image_folder((dir.path() / "cls").string());
  REQUIRE(folder->size() == 3);
  for (int64_t i = 0; i < folder->size(); ++i) {
    if (folder->source(i) != pipe_jpg) continue;
    CHECK(test::returns_without_a_writer(pipe_jpg, [&] { CHECK_THROWS_AS(folder->load(i, {}), CorruptImageError); }));
  }
}

TEST_CASE("a file that is not IDX: the message names its magic, what it is, and the IDX magic expected") {
  TempDir dir;
  const std::string wrong = dir.write("train-images-idx3-ubyte", {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1});
  const std::string m = test::error_message([&] { read_idx(wrong); });
  CHECK(m.find("IDX file " + wrong + " starts with magic 0x12345678, not an IDX magic number") != std::string::npos);
  CHECK(m.find("0x00000803 for MNIST images, 0x00000801 for labels") != std::string::npos);
  CHECK(m.find("point at the MNIST-format files") != std::string::npos);
  // What it is, when its first bytes say so: an HDF5 file (also inside a .gz), a PNG image.
  const std::vector<uint8_t> hdf5 = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n', 0, 0};
  CHECK(test::error_message([&] { read_idx(dir.write("h5-idx1-ubyte", hdf5)); }).find("starts with magic 0x89484446, an HDF5 file, not") !=
        std::string::npos);
  write_gzip((dir.path() / "h5-idx1-ubyte.gz").string(), hdf5);
  CHECK(test::error_message([&] { read_idx((dir.path() / "h5-idx1-ubyte.gz").string()); }).find("magic 0x89484446, an HDF5 file") !=
        std::string::npos);
  const std::vector<uint8_t> png = encode_image(test::smooth_image(4, 4, 1), ImageFormat::png);
  CHECK(test::error_message([&] { read_idx(dir.write("png-idx1-ubyte", png)); }).find("magic 0x89504e47, a PNG image") != std::string::npos);
  CHECK(test::error_message([&] { read_idx(dir.write("text-idx1-ubyte", {'a', 'b', 'c', 'd', 'e'})); }).find("magic 0x61626364, text") !=
        std::string::npos);
}

TEST_CASE("IDX image and label files become a 1-channel dataset, raw or gzip") {
  TempDir dir;
  std::vector<uint8_t> pixels(3 * 4 * 5);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 3);
  const std::string images = dir.write("imgs-idx3-ubyte", idx_bytes({3, 4, 5}, pixels));
  write_gzip((dir.path() / "labels-idx1-ubyte.gz").string(), idx_bytes({3}, {2, 0, 1}));
  auto ds = open_idx(images, (dir.path() / "labels-idx1-ubyte.gz").string());
  REQUIRE(ds->size() == 3);
  CHECK(ds->num_classes() == 3);
  CHECK(ds->class_names()[2] == "2");
  CHECK(ds->label(0) == 2);
  CHECK(ds->label(2) == 1);
  const Image second = ds->load(1, {.channels = 1});
  CHECK(second.height == 4);
  CHECK(second.width == 5);
  CHECK(second.channels == 1);
  CHECK(second.at(0, 0, 0) == pixels[20]);
  CHECK(second.at(3, 4, 0) == pixels[39]);
  const Image rgb = ds->load(1, {.channels = 3});  // gray replicated
  CHECK(rgb.at(2, 1, 0) == pixels[20 + 11]);
  CHECK(rgb.at(2, 1, 2) == pixels[20 + 11]);

  const std::string short_labels = dir.write("two-labels", idx_bytes({2}, {0, 1}));
  CHECK(test::error_message([&] { open_idx(images, short_labels); }).find("do not belong together") != std::string::npos);
  const std::string names_err =
      test::error_message([&] { open_idx(images, (dir.path() / "labels-idx1-ubyte.gz").string(), {"a", "b"}); });
  CHECK(names_err.find("label 2, outside [0, 2)") != std::string::npos);
}

TEST_CASE("Fashion-MNIST as Debian ships it, when present") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) return;
  auto ds = open_mnist(dir, /*train=*/false);
  CHECK(ds->size() == 10000);
  CHECK(ds->num_classes() == 10);
  CHECK(ds->class_names()[9] == "Ankle boot");
  CHECK(ds->load(0, {.channels = 1}).height == 28);
}

TEST_CASE("CIFAR-10 and CIFAR-100 binary records, planar to HWC") {
  TempDir dir;
  std::vector<uint8_t> ten;
  append_cifar_record(ten, {3}, 0);
  append_cifar_record(ten, {9}, 100);
  dir.write("test_batch.bin", ten);
  auto c10 = open_cifar(dir.path().string(), CifarVariant::cifar10, /*train=*/false);
  REQUIRE(c10->size() == 2);
  CHECK(c10->class_names()[3] == "cat");
  CHECK(c10->label(1) == 9);
  const Image img = c10->load(1, {.channels = 3});
  // pixel p = y * 32 + x, channel c holds seed + 3 c + p (mod 256)
  CHECK(img.at(0, 0, 0) == 100);
  CHECK(img.at(0, 0, 2) == 106);
  CHECK(img.at(1, 2, 1) == static_cast<uint8_t>(100 + 3 + 34));

  std::vector<uint8_t> hundred;
  append_cifar_record(hundred, {5, 77}, 1);  // coarse 5, fine 77
  const std::string train = dir.write("c100/train.bin", hundred);
  dir.write_text("c100/fine_label_names.txt", "");
  auto c100 = open_cifar_files({train}, CifarVariant::cifar100);
  CHECK(c100->label(0) == 77);
  CHECK(c100->num_classes() == 100);

  ten.pop_back();
  const std::string truncated = dir.write("bad/test_batch.bin", ten);
  const std::string err = test::error_message([&] { open_cifar_files({truncated}, CifarVariant::cifar10); });
  CHECK(err.find(truncated) != std::string::npos);
  CHECK(err.find("not a whole number") != std::string::npos);
  std::vector<uint8_t> bad_label;
  append_cifar_record(bad_label, {12}, 0);
  const std::string wrong = dir.write("bad/label.bin", bad_label);
  CHECK(test::error_message([&] { open_cifar_files({wrong}, CifarVariant::cifar10); }).find("record 0: label 12") !=
        std::string::npos);
}

TEST_CASE("ImageFolder: classes sorted by folder name, JPEG/PNG/BMP decoded, other files ignored") {
  TempDir dir;
  using cnn::data::test::smooth_image;
  dir.write("zebra/b.png", encode_image(smooth_image(10, 12, 3, 1), ImageFormat::png));
  dir.write("zebra/a.jpg", encode_image(smooth_image(20, 30, 3, 2), ImageFormat::jpeg, 95));
  dir.write("apple/nested/x.bmp", encode_image(smooth_image(8, 9, 3, 3), ImageFormat::bmp));
  dir.write_text("apple/readme.txt", "not an image");
  dir.write_text("apple/.hidden.jpg", "hidden");
  auto ds = open_image_folder(dir.path().string());
  REQUIRE(ds->size() == 3);
  CHECK(ds->class_names() == std::vector<std::string>{"apple", "zebra"});
  CHECK(ds->label(0) == 0);
  CHECK(ds->source(1).ends_with("zebra/a.jpg"));
  CHECK(ds->label(2) == 1);
  const Image bmp = ds->load(0, {.channels = 3});
  CHECK(test::max_abs_diff(bmp, smooth_image(8, 9, 3, 3)) == 0);
  const Image png = ds->load(2, {.channels = 3});
  CHECK(test::max_abs_diff(png, smooth_image(10, 12, 3, 1)) == 0);
  const Image jpg = ds->load(1, {.channels = 3});
  CHECK(jpg.height == 20);
  CHECK(test::max_abs_diff(jpg, smooth_image(20, 30, 3, 2)) <= 8);

  dir.write_text("empty/.keep", "");
  const std::string err = test::error_message([&] { open_image_folder(dir.path().string()); });
  CHECK(err.find("empty") != std::string::npos);
  CHECK(err.find("holds no image files") != std::string::npos);
  CHECK(test::error_message([&] { open_image_folder((dir.path() / "nope").string()); }).find("is not a folder") !=
        std::string::npos);
}

TEST_CASE("ImageFolder: looping and dangling links are unreadable samples, directory links back up are not followed") {
  namespace fs = std::filesystem;
  TempDir dir;
  using cnn::data::test::smooth_image;
  const fs::path root = dir.path() / "images";
  dir.write("images/cat/good.png", encode_image(smooth_image(8, 8, 3, 1), ImageFormat::png));
  dir.write("images/dog/good.png", encode_image(smooth_image(8, 8, 3, 2), ImageFormat::png));
  dir.write("elsewhere/extra.png", encode_image(smooth_image(8, 8, 3, 3), ImageFormat::png));
  fs::create_symlink("loop2.jpg", root / "cat/loop1");  // loop1 -> loop2.jpg -> loop1
  fs::create_symlink("loop1", root / "cat/loop2.jpg");
  fs::create_symlink("missing.jpg", root / "cat/dangling.jpg");
  fs::create_directories(root / "cat/a");
  fs::create_directory_symlink("..", root / "cat/a/up");   // back into cat
  fs::create_directory_symlink("..", root / "dog/root");   // back to the root
  fs::create_directory_symlink("../../..", root / "cat/a/top");  // to the folder that holds the root
  fs::create_directory_symlink(dir.path() / "elsewhere", root / "dog/more");  // a folder outside: followed
  fs::create_symlink("nowhere", root / "ghost");  // a dangling link where a class folder could be
  fs::create_symlink("selfish", root / "selfish");  // a link to itself
  fs::create_directory_symlink(".", root / "again");  // the root as a class of itself

  std::vector<std::string> warnings;
  auto ds = open_image_folder(root.string(), [&](const std::string& m) { warnings.push_back(m); });
  CHECK(ds->class_names() == std::vector<std::string>{"cat", "dog"});
  REQUIRE(ds->size() == 5);
  CHECK(ds->source(0).ends_with("cat/dangling.jpg"));
  CHECK(ds->source(1).ends_with("cat/good.png"));
  CHECK(ds->source(2).ends_with("cat/loop2.jpg"));
  CHECK(ds->source(3).ends_with("dog/good.png"));
  CHECK(ds->source(4).ends_with("dog/more/extra.png"));
  CHECK(ds->load(1, {.channels = 3}).height == 8);
  CHECK(ds->load(4, {.channels = 3}).height == 8);
  // The broken links are samples that cannot be read: the loader skips and counts them.
  CHECK_THROWS_WITH_AS(ds->load(0, {.channels = 3}), doctest::Contains("a symbolic link to missing.jpg, which does not exist"),
                       CorruptImageError);
  CHECK_THROWS_WITH_AS(ds->load(2, {.channels = 3}), doctest::Contains("a symbolic link that loops"), CorruptImageError);
  // One warning for each link left out, naming it; the image-named broken links warn when loaded.
  auto warned = [&](const std::string& what) {
    return std::count_if(warnings.begin(), warnings.end(), [&](const std::string& w) { return w.find(what) != std::string::npos; });
  };
  CHECK(warnings.size() == 7);
  CHECK(warned("not following " + (root / "cat/a/top").string() + ": it leads back to " + fs::canonical(dir.path()).string() +
               ", which holds " + fs::canonical(root).string()) == 1);
  CHECK(warned("skipping " + (root / "cat/loop1").string() + ": a symbolic link that loops") == 1);
  CHECK(warned("not following " + (root / "cat/a/up").string() + ": it leads back to") == 1);
  CHECK(warned("not following " + (root / "dog/root").string() + ": it leads back to") == 1);
  CHECK(warned("skipping " + (root / "ghost").string() + ": a symbolic link to nowhere, which does not exist") == 1);
  CHECK(warned("skipping " + (root / "selfish").string() + ": a symbolic link that loops") == 1);
  CHECK(warned("not following " + (root / "again").string() + ": it leads back to " + fs::canonical(root).string() +
               ", which holds the ImageFolder") == 1);

  // cnn_pack lists the broken links among the unreadable files and packs the rest.
  TempDir out;
  PackOptions options;
  options.size = 8;
  options.log = [](const std::string&) {};
  const PackReport report = pack_dataset(*ds, (out.path() / "p.h5").string(), options);
  CHECK(report.written == 3);
  CHECK(report.skipped.size() == 2);
  CHECK(check_dataset(*ds, 2).size() == 2);
}

TEST_CASE("list files: header or not, index or name labels, paths relative to the list") {
  TempDir dir;
  using cnn::data::test::pattern_image;
  dir.write("imgs/one.png", encode_image(pattern_image(4, 4, 3, 1), ImageFormat::png));
  dir.write("imgs/two, with comma.png", encode_image(pattern_image(4, 4, 3, 2), ImageFormat::png));
  dir.write("imgs/three.png", encode_image(pattern_image(4, 4, 3, 3), ImageFormat::png));

  SUBCASE("header and class names") {
    const std::string list = dir.write_text(
        "train.csv", "path,label\nimgs/one.png,dog\n\"imgs/two, with comma.png\",cat\n# comment\nimgs/three.png,dog\n");
    auto ds = open_list_file(list);
    REQUIRE(ds->size() == 3);
    CHECK(ds->class_names() == std::vector<std::string>{"cat", "dog"});
    CHECK(ds->label(0) == 1);
    CHECK(ds->label(1) == 0);
    CHECK(test::max_abs_diff(ds->load(1, {.channels = 3}), pattern_image(4, 4, 3, 2)) == 0);
  }
  SUBCASE("no header, indices, given class names, CRLF line ends") {
    const std::string list = dir.write_text("l.csv", "imgs/one.png,2\r\nimgs/two, with comma.png,0\r\n");
    ListFileOptions options;
    options.class_names = {"a", "b", "c"};
    auto ds = open_list_file(list, options);
    CHECK(ds->size() == 2);
    CHECK(ds->label(0) == 2);
    CHECK(ds->num_classes() == 3);
    CHECK(ds->source(1) == (dir.path() / "imgs/two, with comma.png").string());
  }
  SUBCASE("numbered classes up to the largest index") {
    auto ds = open_list_file(dir.write_text("n.csv", "imgs/one.png,4\n"));
    CHECK(ds->num_classes() == 5);
  }
  SUBCASE("start-up errors name the file and line") {
    ListFileOptions options;
    options.class_names = {"a", "b"};
    const std::string range = dir.write_text("r.csv", "imgs/one.png,0\nimgs/three.png,2\n");
    const std::string e1 = test::error_message([&] { open_list_file(range, options); });
    CHECK(e1.find(range + ":2: label 2 is outside [0, 2)") != std::string::npos);
    const std::string missing = dir.write_text("m.csv", "imgs/one.png,0\nimgs/gone.png,1\n");
    const std::string e2 = test::error_message([&] { open_list_file(missing); });
    CHECK(e2.find("1 listed file(s) do not exist") != std::string::npos);
    CHECK(e2.find(missing + ":2: " + (dir.path() / "imgs/gone.png").string()) != std::string::npos);
    const std::string unknown = dir.write_text("u.csv", "imgs/one.png,zebra\n");
    CHECK(test::error_message([&] { open_list_file(unknown, options); }).find(":1: class \"zebra\"") != std::string::npos);
    // A label index numbers the classes up to it: a huge one is refused, not allocated as names.
    const std::string huge = dir.write_text("h.csv", "imgs/one.png,999999999999\n");
    CHECK(test::error_message([&] { open_list_file(huge); }).find(huge + ":1: label 999999999999 is beyond the") !=
          std::string::npos);
    const std::string malformed = dir.write_text("x.csv", "imgs/one.png\n");
    CHECK(test::error_message([&] { open_list_file(malformed); }).find(":1: expected \"path,label\"") != std::string::npos);
  }
}

// A class folder named with a line break wrote two lines into classes.txt for one class, and every
// later class name read back from it was shifted.
TEST_CASE("a class name holding a line break is refused, naming it") {
  TempDir dir;
  dir.write("cls/ok/a.png", encode_image(test::smooth_image(8, 8, 3), ImageFormat::png));
  dir.write("cls/two\nlines/b.png", encode_image(test::smooth_image(8, 8, 3), ImageFormat::png));
  CHECK_THROWS_WITH_AS(open_image_folder((dir.path() / "cls").string()),
                       doctest::Contains("the class name 'two\nlines' holds a line break"), Error);
}

// A list file saved with a byte-order mark reported its first image as missing; a dataset path that
// does not exist was answered with "cannot tell what dataset ... is".
TEST_CASE("a list file with a UTF-8 byte-order mark reads its first row, a missing dataset path says it does not exist") {
  TempDir dir;
  dir.write("a.png", encode_image(test::smooth_image(8, 8, 3), ImageFormat::png));
  dir.write("b.png", encode_image(test::smooth_image(8, 8, 3, 1), ImageFormat::png));
  const std::string list = dir.write_text("list.csv", "\xEF\xBB\xBF" "a.png,cat\nb.png,dog\n");
  const auto ds = open_list_file(list);
  REQUIRE(ds->size() == 2);
  CHECK(ds->source(0) == (dir.path() / "a.png").string());
  CHECK(ds->class_names() == std::vector<std::string>{"cat", "dog"});
  CHECK_THROWS_WITH_AS(open_dataset((dir.path() / "no_such_data").string()), doctest::Contains("no_such_data' does not exist"),
                       Error);
}
