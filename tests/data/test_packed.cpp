// Packed HDF5 datasets: pixels and encoded storage round-trip through pack_dataset and
// PackedDataset, corrupt files are left out and reported, the scan lists them without writing,
// and the loader reads packed files directly.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <filesystem>
#include <functional>

#include "data/array_dataset.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/loader.h"
#include "data/open_dataset.h"
#include "data/packed_dataset.h"
#include "engine/io/hdf5.h"
#include "fixtures.h"
#include "packed_by_hand.h"

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

// The folder's ten readable files packed as encoded bytes into out/encoded.h5.
std::string pack_encoded(const Dataset& dataset, const TempDir& out) {
  PackOptions o;
  o.encoded = true;
  const std::string path = (out.path() / "encoded.h5").string();
  REQUIRE(pack_dataset(dataset, path, quiet(o)).written == 10);
  return path;
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
  const PackedDataset packed(pack_encoded(*ds, out));
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
  native.encoded = true;
  CHECK(error_message([&] { pack_dataset(array, apath, quiet(native)); }).find("needs an image folder or a list file") !=
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

TEST_CASE("opening something that is not a packed dataset names what it is and what to do") {
  TempDir dir;
  auto message = [](const std::string& path) { return error_message([&] { PackedDataset p(path); }); };
  CHECK(message((dir.path() / "none.h5").string()).find("make one with cnn_pack") != std::string::npos);
  // A folder, even one of class folders of images: format = packed opens it as nothing else.
  dir.write("cats/a.png", encode_image(smooth_image(8, 8, 3), ImageFormat::png));
  for (const std::string& m : {message(dir.path().string()), error_message([&] { open_dataset("packed:" + dir.path().string()); })}) {
    CHECK(m.find(dir.path().string() + " is a folder, not a packed dataset file") != std::string::npos);
    CHECK(m.find("format = 'cnn-pack-1', made by cnn_pack") != std::string::npos);
    CHECK(m.find("use format = folder, or pack it: cnn_pack") != std::string::npos);
  }
  // Other formats under a .h5 name: what their first bytes are, against HDF5's signature.
  const std::string text = message(dir.write_text("x.h5", "not hdf5"));
  CHECK(text.find("x.h5 is not an HDF5 file: it starts with magic 0x6e6f7420, text where HDF5's signature 0x89484446 is expected") !=
        std::string::npos);
  CHECK(text.find("pack it with cnn_pack") != std::string::npos);
  CHECK(message(dir.write("png.h5", encode_image(smooth_image(4, 4, 3), ImageFormat::png))).find("magic 0x89504e47, a PNG image") !=
        std::string::npos);
  // HDF5 files that are not packed datasets: a checkpoint (its format a variable-length string), weights, another version.
  io::TensorFile checkpoint;
  checkpoint.tensors.emplace_back("fc.weight", Tensor::zeros({2, 2}));
  checkpoint.attributes["format"] = std::string("cnn-checkpoint");
  io::save_hdf5(dir.path() / "last.h5", checkpoint);
  const std::string m = message((dir.path() / "last.h5").string());
  CHECK(m.find("last.h5 is a cnn_train checkpoint (an HDF5 file with format 'cnn-checkpoint'), not a packed dataset") != std::string::npos);
  CHECK(m.find("point [data] path or val_path at the data") != std::string::npos);
  checkpoint.attributes.clear();
  io::save_hdf5(dir.path() / "weights.h5", checkpoint);
  CHECK(message((dir.path() / "weights.h5").string()).find("weights.h5 is an HDF5 file without a 'format' attribute") != std::string::npos);
  checkpoint.attributes["format"] = std::string("cnn-pack-0");
  io::save_hdf5(dir.path() / "old.h5", checkpoint);
  CHECK(message((dir.path() / "old.h5").string()).find("with format 'cnn-pack-0', not a packed dataset") != std::string::npos);
}

namespace {
// The i64 dataset `name` of an HDF5 file.
std::vector<int64_t> read_i64(const std::string& path, const char* name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  REQUIRE(set >= 0);
  const hid_t space = H5Dget_space(set);
  std::vector<int64_t> values(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  CHECK(H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Sclose(space);
  H5Dclose(set);
  H5Fclose(file);
  return values;
}

// Overwrites the i64 dataset `name` of an HDF5 file with as many new values.
void overwrite_i64(const std::string& path, const char* name, const std::vector<int64_t>& values) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  REQUIRE(set >= 0);
  CHECK(H5Dwrite(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(set);
  H5Fclose(file);
}

// Replaces dataset `name` with an empty chunked one whose header claims `dims`: a few hundred
// bytes on disk, whatever the size claimed.
void replace_with_claim(const std::string& path, const char* name, hid_t type, std::vector<hsize_t> dims) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  CHECK(H5Ldelete(file, name, H5P_DEFAULT) >= 0);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t props = H5Pcreate(H5P_DATASET_CREATE);
  std::vector<hsize_t> chunk(dims.size(), 1);
  H5Pset_chunk(props, static_cast<int>(chunk.size()), chunk.data());
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, props, H5P_DEFAULT);
  CHECK(set >= 0);
  H5Dclose(set);
  H5Pclose(props);
  H5Sclose(space);
  H5Fclose(file);
}
}  // namespace

TEST_CASE("a packed index that does not fit its data is refused with the entry, before anything is allocated") {
  TempDir src, out;
  auto ds = folder_with_one_corrupt(src);
  const std::string good = pack_encoded(*ds, out);
  auto damaged = [&](const std::function<void(const std::string&)>& damage) {
    const std::string path = (out.path() / "damaged.h5").string();
    std::filesystem::copy_file(good, path, std::filesystem::copy_options::overwrite_existing);
    damage(path);
    return error_message([&] { PackedDataset p(path); });
  };
  const std::vector<int64_t> offsets = read_i64(good, "offsets");
  REQUIRE(offsets.size() == 11);
  const int64_t total = offsets[10];

  std::vector<int64_t> backwards = offsets;
  backwards[4] = offsets[3] - 1;
  CHECK(damaged([&](const std::string& p) { overwrite_i64(p, "offsets", backwards); })
            .find("/offsets entry 4 (the start of image 4) is " + std::to_string(offsets[3] - 1) + ", before entry 3's " +
                  std::to_string(offsets[3]) + " (offsets must not decrease); the index is damaged: pack the dataset again") !=
        std::string::npos);
  std::vector<int64_t> past = offsets;
  past[10] = total + 1000000;
  CHECK(damaged([&](const std::string& p) { overwrite_i64(p, "offsets", past); })
            .find("/offsets entry 10 (the start of image 10) is " + std::to_string(total + 1000000) + ", past the end of the " +
                  std::to_string(total) + " bytes of /encoded") != std::string::npos);
  std::vector<int64_t> negative = offsets;
  negative[1] = -5;
  CHECK(damaged([&](const std::string& p) { overwrite_i64(p, "offsets", negative); }).find("entry 1 (the start of image 1) is -5, before entry 0's 0") !=
        std::string::npos);
  std::vector<int64_t> late = offsets;
  late[0] = 7;
  CHECK(damaged([&](const std::string& p) { overwrite_i64(p, "offsets", late); }).find("entry 0 (the start of image 0) is 7, not 0") !=
        std::string::npos);
  // Counts that would need more memory than the file holds: 2^40 labels (8 TiB), 2^40 offsets.
  const std::string labels = damaged([](const std::string& p) { replace_with_claim(p, "labels", H5T_NATIVE_INT64, {1ull << 40}); });
  CHECK(labels.find("/labels claims 8.79609e+12 bytes (1099511627776 entries), more than the whole file's") != std::string::npos);
  CHECK(labels.find("pack the dataset again with cnn_pack") != std::string::npos);
  CHECK(damaged([](const std::string& p) { replace_with_claim(p, "offsets", H5T_NATIVE_INT64, {1ull << 40}); }).find("/offsets claims") !=
        std::string::npos);

  // Pixel files: an /images header claiming 100000 x 100000 x 3 pixels per image.
  const std::string pixel_file = (out.path() / "pixels.h5").string();
  PackOptions o;
  o.size = 8;
  REQUIRE(pack_dataset(*ds, pixel_file, quiet(o)).written == 10);
  replace_with_claim(pixel_file, "images", H5T_NATIVE_UINT8, {10, 100000, 100000, 3});
  CHECK(error_message([&] { PackedDataset p(pixel_file); }).find("/images claims 3e+11 bytes (4 dimensions), more than the whole file's") !=
        std::string::npos);
}

TEST_CASE("packed: damaged files are refused with a cnn::Error") {
  TempDir dir;
  HandPackedFile file;
  file.labels = {1, 0};
  file.class_names = {"cat", "dog"};
  file.data = Tensor::zeros({2, 4, 4, 3}, DType::u8);
  const std::string path = (dir.path() / "packed.h5").string();
  write_packed_by_hand(path, file);
  CHECK(PackedDataset(path).num_classes() == 2);
  // Names never written read as null pointers; they were turned into std::string (std::logic_error).
  file.class_names_written = false;
  write_packed_by_hand(path, file);
  CHECK(error_message([&] { PackedDataset p(path); }).find("class_names has names that were never written") !=
        std::string::npos);
}

TEST_CASE("packed: images that are not bytes and labels that are not integers are refused, not converted") {
  // HDF5 would convert float pixels in [0, 1] to 0 or 1 (black images), clamp int16 pixels to 0..255
  // and truncate float labels; each is refused with what the file holds and what to do.
  TempDir dir;
  HandPackedFile file;
  file.labels = {1, 0};
  file.class_names = {"cat", "dog"};
  file.data = Tensor::full({2, 4, 4, 3}, 200.0f, DType::u8);
  const std::string path = (dir.path() / "packed.h5").string();
  file.pixel_type = "f32";
  write_packed_by_hand(path, file);
  const std::string floats = error_message([&] { PackedDataset p(path); });
  CHECK(floats.find("/images holds 32-bit floats, where a packed file holds 8-bit unsigned pixels (0 to 255)") != std::string::npos);
  CHECK(floats.find("round(x * 255)") != std::string::npos);
  file.pixel_type = "i16";
  write_packed_by_hand(path, file);
  CHECK(error_message([&] { PackedDataset p(path); }).find("/images holds 16-bit signed integers") != std::string::npos);
  file.pixel_type = "u8";
  file.float_labels = true;
  write_packed_by_hand(path, file);
  CHECK(error_message([&] { PackedDataset p(path); })
            .find("/labels holds 32-bit floats, where labels are integer class indices (0 to classes - 1)") != std::string::npos);
  file.float_labels = false;
  write_packed_by_hand(path, file);
  PackedDataset good(path);
  CHECK(good.num_classes() == 2);
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

// An interrupted cnn_pack left its OUT.h5.tmp behind (720 MB in the case found).
TEST_CASE("packing stopped by a request (Ctrl-C in cnn_pack) removes its temporary file and writes nothing") {
  TempDir src, out;
  auto ds = folder_with_one_corrupt(src);
  for (const bool encoded : {false, true}) {
    CAPTURE(encoded);
    PackOptions o;
    o.size = 16;
    o.encoded = encoded;
    int asked = 0;  // pixels: one batch of 11, asked before it; encoded: stopped after 3 files
    o.stop_requested = [&asked, encoded] { return ++asked > (encoded ? 3 : 0); };
    const std::string path = (out.path() / "stopped.h5").string();
    CHECK_THROWS_WITH_AS(pack_dataset(*ds, path, quiet(o)), doctest::Contains("stopped by a signal"), Error);
    CHECK(asked == (encoded ? 4 : 1));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}
