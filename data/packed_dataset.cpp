// The packed HDF5 format: writer (cnn_pack), reader (PackedDataset) and the corrupt-file scan.
// Pixel files are written from a Loader (u8 batches, Resize + CenterCrop), which decodes in
// parallel and skips corrupt files; the HDF5 writes happen on the calling thread.
#include "data/packed_dataset.h"

#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "data/file_dataset.h"
#include "data/file_signature.h"
#include "data/loader.h"
#include "data/worker_threads.h"

namespace cnn::data {

namespace {
constexpr const char* kFormat = "cnn-pack-1";
constexpr hsize_t kEncodedChunk = 1 << 20;

// Owns an HDF5 identifier and closes it with the matching function.
class H5 {
 public:
  H5(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    CNN_CHECK(id >= 0, "HDF5: ", what, " failed");
  }
  ~H5() {
    if (id_ >= 0) close_(id_);
  }
  H5(const H5&) = delete;
  H5& operator=(const H5&) = delete;
  hid_t get() const { return id_; }
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t status, const std::string& what) { CNN_CHECK(status >= 0, "HDF5: ", what, " failed"); }

void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  H5 type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check(H5Tset_size(type.get(), value.size()), "H5Tset_size");
  H5 space(H5Screate(H5S_SCALAR), H5Sclose, "scalar space");
  H5 attr(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
          std::string("creating attribute ") + name);
  check(H5Awrite(attr.get(), type.get(), value.data()), std::string("writing attribute ") + name);
}

// A string attribute, fixed-length (as cnn_pack writes them) or variable-length (as checkpoints
// and h5py do); nothing when the object has no such attribute.
std::optional<std::string> read_string_attribute(hid_t object, const char* name, const std::string& path) {
  if (H5Aexists(object, name) <= 0) return std::nullopt;
  H5 attr(H5Aopen(object, name, H5P_DEFAULT), H5Aclose, path + ": opening attribute " + name);
  H5 type(H5Aget_type(attr.get()), H5Tclose, path + ": attribute " + name + "'s type");
  CNN_CHECK(H5Tget_class(type.get()) == H5T_STRING, path, ": attribute '", name, "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    H5 memory(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
    check(H5Tset_size(memory.get(), H5T_VARIABLE), "H5Tset_size");
    check(H5Tset_cset(memory.get(), H5Tget_cset(type.get())), "H5Tset_cset");  // UTF-8 from the checkpoint writer
    char* text = nullptr;
    check(H5Aread(attr.get(), memory.get(), &text), path + ": reading attribute " + name);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  std::string value(H5Tget_size(type.get()), '\0');
  check(H5Aread(attr.get(), type.get(), value.data()), path + ": reading attribute " + name);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

// An extendible 1-D or 4-D u8/i64 dataset grown as records arrive.
hid_t create_extendible(hid_t file, const char* name, hid_t type, std::vector<hsize_t> chunk) {
  std::vector<hsize_t> dims(chunk.size(), 0), max(chunk.size(), H5S_UNLIMITED);
  for (size_t i = 1; i < chunk.size(); ++i) dims[i] = max[i] = chunk[i];
  H5 space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max.data()), H5Sclose, "dataspace");
  H5 props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
  check(H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data()), "H5Pset_chunk");
  return H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT);
}

// Appends `count` records of `record_elems` elements at `at` (in records) along the first axis.
void append(hid_t dataset, hid_t type, const void* data, hsize_t at, hsize_t count, const std::string& what) {
  H5 space(H5Dget_space(dataset), H5Sclose, what + " space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  dims[0] = at + count;
  check(H5Dset_extent(dataset, dims.data()), "extending " + what);
  H5 file_space(H5Dget_space(dataset), H5Sclose, what + " space");
  std::vector<hsize_t> start(static_cast<size_t>(rank), 0), size = dims;
  start[0] = at;
  size[0] = count;
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, size.data(), nullptr),
        "selecting " + what);
  H5 memory(H5Screate_simple(rank, size.data(), nullptr), H5Sclose, "memory space");
  check(H5Dwrite(dataset, type, memory.get(), file_space.get(), H5P_DEFAULT, data), "writing " + what);
}

void write_class_names(hid_t file, const std::vector<std::string>& names) {
  H5 type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size");
  const hsize_t count = names.size();
  H5 space(H5Screate_simple(1, &count, nullptr), H5Sclose, "class name space");
  H5 set(H5Dcreate2(file, "class_names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
         "creating class_names");
  std::vector<const char*> pointers;
  for (const auto& n : names) pointers.push_back(n.c_str());
  check(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()), "writing class_names");
}

// The element count of a dataset, refused (before anything is allocated for it) when its elements
// of `element_bytes` would take more than the whole file: cnn_pack stores every dataset
// uncompressed, so such a count comes from a damaged header, not from data.
hsize_t elements_within(hid_t dataset, size_t element_bytes, const char* name, const std::string& path,
                        uint64_t file_bytes) {
  H5 space(H5Dget_space(dataset), H5Sclose, path + ": " + name + " space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  CNN_CHECK(rank >= 0 && rank <= 8, path, ": /", name, " has ", rank, " dimensions; the file is damaged, pack it again");
  hsize_t dims[8] = {};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  // In long double so that no product of dimensions overflows before it is compared.
  long double bytes = static_cast<long double>(element_bytes);
  hsize_t count = 1;
  for (int i = 0; i < rank; ++i) {
    bytes *= static_cast<long double>(dims[i]);
    count *= dims[i];
  }
  CNN_CHECK(bytes <= static_cast<long double>(file_bytes), path, ": /", name, " claims ", static_cast<double>(bytes),
            " bytes (", rank == 1 ? std::to_string(dims[0]) + " entries" : std::to_string(rank) + " dimensions",
            "), more than the whole file's ", file_bytes, "; the file is damaged (its index does not match its data): "
            "pack the dataset again with cnn_pack");
  return count;
}

std::vector<std::string> read_class_names(hid_t file, const std::string& path, uint64_t file_bytes) {
  H5 set(H5Dopen2(file, "class_names", H5P_DEFAULT), H5Dclose, path + ": opening class_names");
  const hsize_t count = elements_within(set.get(), 1, "class_names", path, file_bytes);
  H5 space(H5Dget_space(set.get()), H5Sclose, "class name space");
  CNN_CHECK(count <= static_cast<hsize_t>(kMaxClasses), path, ": class_names holds ", count, " names, more than ", kMaxClasses,
            "; the file is damaged, pack it again");
  H5 type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size");
  std::vector<char*> pointers(static_cast<size_t>(count), nullptr);
  check(H5Dread(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()), path + ": reading class_names");
  // A name never written reads as a null pointer (the dataset's fill value).
  const bool all_written = std::none_of(pointers.begin(), pointers.end(), [](const char* p) { return p == nullptr; });
  std::vector<std::string> names;
  if (all_written) names.assign(pointers.begin(), pointers.end());
  H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, pointers.data());
  CNN_CHECK(all_written, path, ": class_names has names that were never written; the file is damaged, pack it again");
  return names;
}

// An HDF5 element type in words: "32-bit floats", "16-bit signed integers", "strings".
std::string type_in_words(hid_t type) {
  const size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return std::to_string(bits) + "-bit " + (H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned" : "signed") + " integers";
    case H5T_FLOAT: return std::to_string(bits) + "-bit floats";
    case H5T_STRING: return "strings";
    default: return "elements of HDF5 type class " + std::to_string(static_cast<int>(H5Tget_class(type)));
  }
}

// Refuses a /labels or /offsets dataset that does not hold integers: HDF5 would convert floats to
// int64 by truncating them, so float labels 0.9 would silently become class 0.
void require_integers(hid_t set, const char* name, const std::string& path) {
  H5 type(H5Dget_type(set), H5Tclose, path + ": " + name + "'s type");
  const bool labels = std::string(name) == "labels";
  CNN_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, path, ": /", name, " holds ", type_in_words(type.get()), ", where ",
            labels ? "labels are integer class indices (0 to classes - 1)" : "offsets are integer byte positions",
            "; store them as integers (int64), or pack the images with cnn_pack");
}

// Refuses /images or /encoded that are not bytes: HDF5 would convert float32 pixels in [0, 1] to
// uint8 0 or 1 (black images) and clamp int16 pixels to 0..255, without a word.
void require_bytes(hid_t set, const char* name, const std::string& path) {
  H5 type(H5Dget_type(set), H5Tclose, path + ": " + name + "'s type");
  const bool bytes = H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_size(type.get()) == 1 &&
                     H5Tget_sign(type.get()) == H5T_SGN_NONE;
  if (bytes) return;
  if (std::string(name) == "images")
    throw Error(path + ": /images holds " + type_in_words(type.get()) +
                ", where a packed file holds 8-bit unsigned pixels (0 to 255); read as bytes they would become black or "
                "clamped images. Scale and round them to 0..255 and store them as uint8 (images in [0, 1]: round(x * 255)), "
                "or pack the source images with cnn_pack");
  throw Error(path + ": /encoded holds " + type_in_words(type.get()) +
              ", where it holds the encoded files' bytes (8-bit unsigned); the file is damaged, pack it again with cnn_pack");
}

std::vector<int64_t> read_i64(hid_t file, const char* name, const std::string& path, uint64_t file_bytes) {
  H5 set(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, path + ": opening " + name);
  require_integers(set.get(), name, path);
  std::vector<int64_t> values(elements_within(set.get(), sizeof(int64_t), name, path, file_bytes));
  if (!values.empty())
    check(H5Dread(set.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), path + ": reading " + name);
  return values;
}

// Reads `count` elements of `dataset` starting at `start` along a flattened first axis.
void read_range(hid_t dataset, std::vector<hsize_t> start, std::vector<hsize_t> count, void* out,
                const std::string& what) {
  H5 file_space(H5Dget_space(dataset), H5Sclose, what);
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), what);
  H5 memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose, what);
  if (H5Dread(dataset, H5T_NATIVE_UINT8, memory.get(), file_space.get(), H5P_DEFAULT, out) < 0)
    throw CorruptImageError(what + ": HDF5 read failed (damaged file?)");
}

void default_log(const std::string& m) { std::fprintf(stderr, "cnn_pack: %s\n", m.c_str()); }
}  // namespace

// ---- reader ----
namespace {
constexpr const char* kWhatPacked = "a packed dataset is one HDF5 file with root attribute format = 'cnn-pack-1', made by cnn_pack";

// Refuses, naming what `path` is instead, anything but an HDF5 file: a folder, another format.
void require_hdf5_file(const std::string& path) {
  std::error_code ec;
  CNN_CHECK(std::filesystem::exists(path, ec), "packed dataset ", path, " does not exist; make one with cnn_pack");
  CNN_CHECK(!std::filesystem::is_directory(path, ec), path, " is a folder, not a packed dataset file (", kWhatPacked,
            "); for a folder of class folders of images use format = folder, or pack it: cnn_pack ", path, " OUT.h5 --size N");
  require_regular_file(path, "packed dataset");  // HDF5 would block in open() on a FIFO
  CNN_CHECK(H5Fis_hdf5(path.c_str()) > 0, path, " is not an HDF5 file: it starts with ", describe_file_start(path),
            " where HDF5's signature 0x89484446 is expected (", kWhatPacked,
            "); point at a packed file, set [data] format to what the data is, or pack it with cnn_pack");
}

// Refuses an HDF5 file that is not a packed dataset of this version, naming what it is instead.
void require_packed_format(hid_t file, const std::string& path) {
  const std::optional<std::string> format = read_string_attribute(file, "format", path);
  CNN_CHECK(format.has_value(), path, " is an HDF5 file without a 'format' attribute (weights, or another program's data?), "
            "not a packed dataset (", kWhatPacked, "); pack the images with cnn_pack");
  CNN_CHECK(*format != "cnn-checkpoint", path, " is a cnn_train checkpoint (an HDF5 file with format 'cnn-checkpoint'), not a ",
            "packed dataset (", kWhatPacked, "); point [data] path or val_path at the data, not at a run's checkpoint");
  CNN_CHECK(*format == kFormat, path, " is an HDF5 file with format '", *format, "', not a packed dataset (", kWhatPacked,
            "); this version reads ", kFormat, ": pack the images again with cnn_pack");
}

// Refuses an index of encoded images that does not fit the data: offsets must start at 0, never
// decrease, and stay within the /encoded bytes. Checked once here so that load() never allocates a
// negative or huge size.
void check_offsets(const std::vector<int64_t>& offsets, hsize_t encoded_bytes, const std::string& path) {
  for (size_t i = 0; i < offsets.size(); ++i) {
    const int64_t at = offsets[i];
    const std::string entry = path + ": /offsets entry " + std::to_string(i) + " (the start of image " + std::to_string(i) + ") is " +
                              std::to_string(at);
    const std::string fix = "; the index is damaged: pack the dataset again with cnn_pack";
    CNN_CHECK(i > 0 || at == 0, entry, ", not 0", fix);
    CNN_CHECK(i == 0 || at >= offsets[i - 1], entry, ", before entry ", i - 1, "'s ", offsets[i - 1],
              " (offsets must not decrease)", fix);
    CNN_CHECK(static_cast<uint64_t>(at) <= encoded_bytes, entry, ", past the end of the ", encoded_bytes, " bytes of /encoded", fix);
  }
}
}  // namespace

PackedDataset::PackedDataset(const std::string& path) : path_(path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become cnn::Errors, not HDF5's stack dumps
  require_hdf5_file(path);
  const uint64_t file_bytes = std::filesystem::file_size(path);
  H5 file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "opening " + path + " (a damaged HDF5 file?)");
  require_packed_format(file.get(), path);
  const std::string storage = read_string_attribute(file.get(), "storage", path).value_or("(none)");
  CNN_CHECK(storage == "pixels" || storage == "encoded", path, ": unknown storage '", storage,
            "' (expected 'pixels' or 'encoded'); the file is damaged, pack it again");
  encoded_ = storage == "encoded";
  labels_ = read_i64(file.get(), "labels", path, file_bytes);
  class_names_ = read_class_names(file.get(), path, file_bytes);
  H5 data(H5Dopen2(file.get(), encoded_ ? "encoded" : "images", H5P_DEFAULT), H5Dclose, path + ": opening the images");
  require_bytes(data.get(), encoded_ ? "encoded" : "images", path);
  if (encoded_) {
    const hsize_t encoded_bytes = elements_within(data.get(), 1, "encoded", path, file_bytes);
    offsets_ = read_i64(file.get(), "offsets", path, file_bytes);
    CNN_CHECK(offsets_.size() == labels_.size() + 1, path, ": ", offsets_.size(), " offsets for ", labels_.size(),
              " labels; the file is damaged, pack it again");
    check_offsets(offsets_, encoded_bytes, path);
  } else {
    H5 space(H5Dget_space(data.get()), H5Sclose, "images space");
    hsize_t dims[4] = {0, 0, 0, 0};
    CNN_CHECK(H5Sget_simple_extent_ndims(space.get()) == 4, path, ": images are not [N, H, W, C]");
    elements_within(data.get(), 1, "images", path, file_bytes);
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    CNN_CHECK(dims[0] == labels_.size(), path, ": ", dims[0], " images but ", labels_.size(), " labels");
    CNN_CHECK(dims[1] >= 1 && dims[1] <= INT32_MAX && dims[2] >= 1 && dims[2] <= INT32_MAX && dims[3] >= 1 && dims[3] <= 4,
              path, ": images are ", dims[1], " x ", dims[2], " x ", dims[3], " (height x width x channels); the file is damaged, pack it again");
    for (int i = 0; i < 3; ++i) shape_[i] = static_cast<int>(dims[i + 1]);
  }
  check_labels(path);
  file_ = file.release();
  data_ = data.release();
}

PackedDataset::~PackedDataset() {
  if (data_ >= 0) H5Dclose(data_);
  if (file_ >= 0) H5Fclose(file_);
}

Image PackedDataset::load(int64_t index, const DecodeOptions& options) const {
  const auto i = static_cast<hsize_t>(index);
  if (encoded_) {
    const auto begin = static_cast<hsize_t>(offsets_[i]), end = static_cast<hsize_t>(offsets_[i + 1]);
    std::vector<uint8_t> bytes(end - begin);
    if (!bytes.empty()) read_range(data_, {begin}, {end - begin}, bytes.data(), source(index));
    return decode_image(bytes.data(), bytes.size(), options, source(index));
  }
  Image image(shape_[0], shape_[1], shape_[2]);
  read_range(data_, {i, 0, 0, 0},
             {1, static_cast<hsize_t>(shape_[0]), static_cast<hsize_t>(shape_[1]), static_cast<hsize_t>(shape_[2])},
             image.pixels.data(), source(index));
  return convert_channels(std::move(image), options.channels);
}

// ---- writer ----
PackReport pack_dataset(const Dataset& dataset, const std::string& out_path, const PackOptions& options) {
  const auto log = options.log ? options.log : default_log;
  const DecodeOptions decode{.channels = options.channels, .max_pixels = options.max_image_pixels};
  const auto* files = dynamic_cast<const FileDataset*>(&dataset);
  CNN_CHECK(!options.encoded || files != nullptr,
            "--encoded keeps the original files' bytes, so it needs an image folder or a list file");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string temp = out_path + ".tmp";
  struct RemoveUnlessDone {  // a failed run leaves no half-written file behind
    const std::string& path;
    bool done = false;
    ~RemoveUnlessDone() {
      std::error_code ec;
      if (!done) std::filesystem::remove(path, ec);
    }
  } cleanup{temp};
  const auto check_stop = [&](int64_t done) {
    CNN_CHECK(!options.stop_requested || !options.stop_requested(), "stopped by a signal after ", done, " of ", dataset.size(),
              " samples; nothing was written (", temp, " removed)");
  };
  H5 file(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "creating " + temp);
  write_string_attribute(file.get(), "format", kFormat);
  write_string_attribute(file.get(), "storage", options.encoded ? "encoded" : "pixels");
  write_class_names(file.get(), dataset.class_names());
  H5 labels(create_extendible(file.get(), "labels", H5T_NATIVE_INT64, {4096}), H5Dclose, "creating labels");
  PackReport report;
  std::vector<int64_t> batch_labels;

  if (options.encoded) {
    H5 encoded(create_extendible(file.get(), "encoded", H5T_NATIVE_UINT8, {kEncodedChunk}), H5Dclose,
               "creating encoded");
    std::vector<int64_t> offsets = {0};
    for (int64_t i = 0; i < dataset.size(); ++i) {
      check_stop(i);
      std::vector<uint8_t> bytes;
      try {
        bytes = files->encoded(i);
        decode_image(bytes.data(), bytes.size(), decode, dataset.source(i));  // readable, and within the pixel limit?
      } catch (const CorruptImageError& e) {
        log(std::string("skipping unreadable sample: ") + e.what());
        report.skipped.push_back(dataset.source(i));
        continue;
      }
      append(encoded.get(), H5T_NATIVE_UINT8, bytes.data(), static_cast<hsize_t>(offsets.back()), bytes.size(),
             "encoded bytes");
      offsets.push_back(offsets.back() + static_cast<int64_t>(bytes.size()));
      const int64_t y = dataset.label(i);
      append(labels.get(), H5T_NATIVE_INT64, &y, static_cast<hsize_t>(report.written++), 1, "labels");
    }
    const hsize_t count = offsets.size();
    H5 space(H5Screate_simple(1, &count, nullptr), H5Sclose, "offsets space");
    H5 set(H5Dcreate2(file.get(), "offsets", H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
           H5Dclose, "creating offsets");
    check(H5Dwrite(set.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()), "writing offsets");
  } else {
    int side_h = options.size, side_w = options.size;
    std::vector<TransformPtr> transforms;
    if (options.size > 0) {
      transforms = {std::make_shared<Resize>(options.size), std::make_shared<CenterCrop>(options.size, options.size)};
    } else {  // native size: every image must have the first one's
      const Image first = dataset.load(0, decode);
      side_h = first.height, side_w = first.width;
    }
    const Pipeline pipeline(transforms, side_h, side_w, options.channels, Normalize::identity(options.channels));
    LoaderOptions lo;
    lo.batch_size = 64;
    lo.workers = options.workers;
    lo.shuffle = false;
    lo.dtype = DType::u8;
    lo.pinned = false;
    lo.max_image_pixels = options.max_image_pixels;
    lo.log = log;
    Loader loader(std::shared_ptr<const Dataset>(&dataset, [](const Dataset*) {}), pipeline, lo);
    const hsize_t chunk[4] = {1, static_cast<hsize_t>(side_h), static_cast<hsize_t>(side_w),
                              static_cast<hsize_t>(options.channels)};
    H5 images(create_extendible(file.get(), "images", H5T_NATIVE_UINT8, {chunk[0], chunk[1], chunk[2], chunk[3]}),
              H5Dclose, "creating images");
    loader.start_epoch(0);
    int64_t next_report = 10000;
    while (auto batch = loader.next()) {
      check_stop(report.written);
      const auto n = static_cast<hsize_t>(batch->size());
      if (n == 0) continue;
      append(images.get(), H5T_NATIVE_UINT8, batch->images.data(), static_cast<hsize_t>(report.written), n, "images");
      append(labels.get(), H5T_NATIVE_INT64, batch->labels.data(), static_cast<hsize_t>(report.written), n, "labels");
      report.written += static_cast<int64_t>(n);
      if (report.written >= next_report) {
        log("packed " + std::to_string(report.written) + " of " + std::to_string(dataset.size()) + " images");
        next_report += 10000;
      }
    }
    report.skipped = loader.corrupt_files();
  }
  CNN_CHECK(report.written > 0, "no readable images in the dataset; nothing was packed");
  check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flushing " + temp);
  H5Fclose(file.release());
  std::filesystem::rename(temp, out_path);
  cleanup.done = true;
  return report;
}

// ---- scan ----
std::vector<std::pair<std::string, std::string>> check_dataset(const Dataset& dataset, int workers, int64_t max_image_pixels) {
  const DecodeOptions decode{.channels = 3, .max_pixels = max_image_pixels};
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::vector<std::pair<int64_t, std::string>> bad;
  std::exception_ptr failure;
  const auto check_images = [&](int) {
    for (int64_t i = next++; i < dataset.size(); i = next++) {
      try {
        dataset.load(i, decode);
      } catch (const CorruptImageError& e) {
        std::lock_guard<std::mutex> lock(mutex);
        bad.emplace_back(i, e.what());
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = dataset.size();
      }
    }
  };
  std::vector<std::thread> threads = start_threads(std::max(workers, 1), check_images, [&] { next = dataset.size(); },
                                                   "image-checking threads", "--workers");
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  std::sort(bad.begin(), bad.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [index, reason] : bad) out.emplace_back(dataset.source(index), std::move(reason));
  return out;
}

}  // namespace cnn::data
