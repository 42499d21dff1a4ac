// Packed HDF5 datasets: pixels and encoded storage round-trip through pack_dataset and
// PackedDataset, corrupt files are left out and reported, the scan lists them without writing,
// and the loader reads packed files directly.
#include <doctest/doctest.h>

#include <filesystem>

#include "data/array_dataset.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/loader.h"
#include "data/packed_dataset.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
// Two classes of JPEG and PNG files of assorted sizes, and one broken file.
std::shared_ptr<FileDataset> folder_with_one_corrupt(const TempDir& dir) {
  for (int i = 0; i < 5; ++i) {
    const Image img = smooth_image(30 + 4 * i, 40 - 2 * i, 3, i);
    dir.write("cats/c" + std::to_string(i) + ".png", encode_image(img, ImageFormat::png));
    dir.write("dogs/d" + std::to_string(i) + ".jpg", encode_image(img, ImageFormat::jpeg, 92));
  }
  dir.write_text("dogs/broken.jpg", "no image here");
  return open_image_folder((dir.path() / "").string());
}

PackOptions quiet(PackOptions o) {
  o.log = [](const std::string&) {};
  return o;
}
}  // namespace

TEST_CASE("pixel packing: pre-resized squares, labels, class names, corrupt files left out") {
  TempDir src, out;
  auto ds = folder_with_one_corrupt(src);
  REQUIRE(ds->size() == 11);
  PackOptions o;
  o.size = 16;
  o.workers = 2;
  const std::string path = (out.path() / "packed.h5").string();
  const PackReport report = pack_dataset(*ds, path, quiet(o));
  CHECK(report.written == 10);
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].ends_with("broken.jpg"));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  const PackedDataset packed(path);
  CHECK_FALSE(packed.encoded());
  REQUIRE(packed.size() == 10);
  CHECK(packed.class_names() == std::vector<std::string>{"cats", "dogs"});
  CHECK(packed.height() == 16);
  CHECK(packed.channels() == 3);
  const Pipeline resize({std::make_shared<Resize>(16), std::make_shared<CenterCrop>(16, 16)}, 16, 16, 3,
                        Normalize::imagenet());
  int64_t checked = 0;
  for (int64_t i = 0, j = 0; i < ds->size(); ++i) {
    if (ds->source(i).ends_with("broken.jpg")) continue;
    CHECK(packed.label(j) == ds->label(i));
    // The packer decodes JPEGs at the DCT scale the resize allows, as the loader does.
    const Image expected = resize.run(ds->load(i, resize.decode_options()), 0, 0, 0, "x");
    CHECK(max_abs_diff(packed.load(j, {.channels = 3}), expected) == 0);
    ++j, ++checked;
  }
  CHECK(checked == 10);
  CHECK(packed.load(3, {.channels = 1}).channels == 1);

  // The loader reads the packed file directly.
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.workers = 2;
  Loader loader(std::make_shared<PackedDataset>(path), Pipeline::train(12), lo);
  loader.start_epoch(0);
  int64_t samples = 0;
  while (auto b = loader.next()) samples += b->size();
  CHECK(samples == 10);
}

TEST_CASE("encoded packing keeps the original bytes, arrays pack at their native size") {
  TempDir src, out;
  auto ds = folder_with_one_corrupt(src);
  PackOptions o;
  o.encoded = true;
  const std::string path = (out.path() / "encoded.h5").string();
  CHECK(pack_dataset(*ds, path, quiet(o)).written == 10);
  const PackedDataset packed(path);
  CHECK(packed.encoded());
  CHECK(max_abs_diff(packed.load(0, {.channels = 3}), ds->load(0, {.channels = 3})) == 0);
  CHECK(max_abs_diff(packed.load(9, {.channels = 3}), ds->load(10, {.channels = 3})) == 0);

  Tensor images = Tensor::empty({3, 5, 6, 1}, DType::u8);
  for (int64_t i = 0; i < images.numel(); ++i) images.data_as<uint8_t>()[i] = static_cast<uint8_t>(i);
  const ArrayDataset array(images, {2, 0, 1}, {"x", "y", "z"}, "array");
  PackOptions native;
  native.channels = 1;
  const std::string apath = (out.path() / "array.h5").string();
  CHECK(pack_dataset(array, apath, quiet(native)).written == 3);
  const PackedDataset back(apath);
  CHECK(back.height() == 5);
  CHECK(back.label(0) == 2);
  CHECK(max_abs_diff(back.load(2, {.channels = 1}), array.load(2, {.channels = 1})) == 0);
  o.encoded = true;
  CHECK(error_message([&] { pack_dataset(array, apath, quiet(o)); }).find("needs an image folder or a list file") !=
        std::string::npos);
}

TEST_CASE("check_dataset lists unreadable files in order and writes nothing") {
  TempDir src;
  auto ds = folder_with_one_corrupt(src);
  src.write("dogs/empty.png", {});
  auto again = open_image_folder(src.path().string());
  const auto before = std::distance(std::filesystem::recursive_directory_iterator(src.path()), {});
  const auto bad = check_dataset(*again, 3);
  REQUIRE(bad.size() == 2);
  CHECK(bad[0].first.ends_with("broken.jpg"));
  CHECK(bad[1].first.ends_with("empty.png"));
  CHECK(bad[1].second.find("empty file") != std::string::npos);
  CHECK(std::distance(std::filesystem::recursive_directory_iterator(src.path()), {}) == before);
}

TEST_CASE("opening something that is not a packed dataset explains itself") {
  TempDir dir;
  const std::string text = dir.write_text("x.h5", "not hdf5");
  CHECK(error_message([&] { PackedDataset p(text); }).find("not an HDF5 file") != std::string::npos);
  CHECK(error_message([&] { PackedDataset p((dir.path() / "none.h5").string()); }).find("make one with cnn_pack") !=
        std::string::npos);
}

TEST_CASE("cnn_pack's pixel limit: a header claiming a huge size is skipped, the limit is an option, 0 lifts it") {
  // A 40 x 30 PNG (1200 pixels) and a 70-byte PNG header claiming 100000 x 100000 pixels.
  TempDir src, out;
  src.write("a/small.png", encode_image(smooth_image(30, 40, 3), ImageFormat::png));
  src.write("a/bomb.png", png_header_claiming(100000, 100000));
  const auto ds = open_image_folder(src.path().string());
  PackOptions o;
  o.size = 8;
  o.workers = 1;
  for (const bool encoded : {false, true}) {
    o.encoded = encoded;
    INFO(std::string(encoded ? "encoded" : "pixels"));
    const std::string path = (out.path() / "p.h5").string();
    o.max_image_pixels = kDefaultMaxImagePixels;
    PackReport report = pack_dataset(*ds, path, quiet(o));
    CHECK(report.written == 1);
    REQUIRE(report.skipped.size() == 1);
    CHECK(report.skipped[0].ends_with("bomb.png"));
    // The limit applies to every image: at 1199 the small one is over it too, and nothing is packed.
    o.max_image_pixels = 1199;
    CHECK(error_message([&] { pack_dataset(*ds, path, quiet(o)); }).find("no readable images") != std::string::npos);
    o.max_image_pixels = 1200;
    CHECK(pack_dataset(*ds, path, quiet(o)).written == 1);
  }
  // The scan reports the same, with the reason; without a limit the bomb's missing data makes it unreadable.
  auto bad = check_dataset(*ds, 1);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].second.find("claims 100000 x 100000 pixels (10000000000), more than the limit of 89478485") != std::string::npos);
  CHECK(bad[0].second.find("--max-image-pixels") != std::string::npos);
  CHECK(check_dataset(*ds, 1, 1199).size() == 2);
  bad = check_dataset(*ds, 1, 0);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].second.find("more than the limit") == std::string::npos);
}
