// Packed files written through the HDF5 C API (packed_by_hand.h).
#include "packed_by_hand.h"

#include <hdf5.h>

#include "engine/error.h"

namespace cnn::data::test {

namespace {
void string_attribute(hid_t file, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  CNN_CHECK(attr >= 0 && H5Awrite(attr, type, value.data()) >= 0, "writing attribute ", name);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

// A dataset of `dims`, written from `data` unless it is null.
void dataset(hid_t file, const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* data) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  CNN_CHECK(set >= 0, "creating dataset ", name);
  if (data) CNN_CHECK(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "writing dataset ", name);
  H5Dclose(set);
  H5Sclose(space);
}
}  // namespace

void write_packed_by_hand(const std::string& path, const HandPackedFile& f) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  CNN_CHECK(file >= 0, "creating ", path);
  string_attribute(file, "format", "cnn-pack-1");
  string_attribute(file, "storage", f.storage);
  if (f.float_labels) {
    const std::vector<float> labels(f.labels.begin(), f.labels.end());
    dataset(file, "labels", H5T_NATIVE_FLOAT, {labels.size()}, labels.data());
  } else {
    dataset(file, "labels", H5T_NATIVE_INT64, {f.labels.size()}, f.labels.data());
  }
  const hid_t text = H5Tcopy(H5T_C_S1);
  H5Tset_size(text, H5T_VARIABLE);
  std::vector<const char*> names;
  for (const std::string& n : f.class_names) names.push_back(n.c_str());
  dataset(file, "class_names", text, {names.size()}, f.class_names_written ? names.data() : nullptr);
  H5Tclose(text);
  const std::vector<int64_t> shape = f.data.shape().to_vector();
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  const char* data_name = f.storage == "encoded" ? "encoded" : "images";
  const uint8_t* bytes = static_cast<const uint8_t*>(f.data.data());
  if (f.pixel_type == "f32") {
    std::vector<float> values(bytes, bytes + f.data.numel());
    for (float& v : values) v /= 255.0f;
    dataset(file, data_name, H5T_NATIVE_FLOAT, dims, values.data());
  } else if (f.pixel_type == "i16") {
    const std::vector<int16_t> values(bytes, bytes + f.data.numel());
    dataset(file, data_name, H5T_NATIVE_INT16, dims, values.data());
  } else {
    CNN_CHECK(f.pixel_type == "u8", "pixel_type ", f.pixel_type);
    dataset(file, data_name, H5T_NATIVE_UINT8, dims, f.data.data());
  }
  if (!f.offsets.empty()) dataset(file, "offsets", H5T_NATIVE_INT64, {f.offsets.size()}, f.offsets.data());
  H5Fclose(file);
}

}  // namespace cnn::data::test
