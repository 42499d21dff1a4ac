// HDF5 tensor files through the HDF5 C API: one dataset per tensor, root attributes for metadata,
// written atomically (see hdf5.h for the layout).
#include "engine/io/hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <utility>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/crc32c.h"
#include "engine/io/hdf5_checksums.h"
#include "engine/io/hdf5_superblock.h"

namespace cnn::io {

static_assert(std::endian::native == std::endian::little, "tensor files are written in the host's byte order");

namespace {

// ---- HDF5 plumbing: owned identifiers, quiet error stack, readable error text ----

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, -1);
      closer_ = other.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether HDF5 succeeded (a file's last bytes are written on close).
  bool close() {
    const bool ok = id_ < 0 || closer_(id_) >= 0;
    id_ = -1;
    return ok;
  }

 private:
  void reset() {
    if (id_ >= 0) closer_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// HDF5 closes the files still open from an exit handler of its own. A file whose close failed (the
// disk was full) stays registered half-closed, and that handler then crashes on it (H5F__close_cb),
// after the clear error was reported. Every file here is closed by its Handle on every path, so the
// handler is not needed; it is turned off before the library starts.
[[maybe_unused]] const bool kNoHdf5ExitHandler = (H5dont_atexit(), true);

// Keeps HDF5 from printing its error stack on stderr; errors are reported as cnn::Error instead.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
};

// The innermost description on HDF5's error stack (the most specific one), or "".
std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        if (e->desc && *e->desc) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "" : " (HDF5: " + reason + ")";
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error("HDF5 file '" + path.string() + "': " + what + hdf5_reason());
}

Handle check(hid_t id, Handle::Closer closer, const std::filesystem::path& path, const std::string& what) {
  if (id < 0) fail(path, what);
  return Handle(id, closer);
}

void check(herr_t status, const std::filesystem::path& path, const std::string& what) {
  if (status < 0) fail(path, what);
}

// HDF5 keeps an attribute in its object header (64 KiB) or, in dense storage, in a heap of the file;
// more than this is a damaged size, refused before memory is allocated for it.
constexpr uint64_t kMaxAttributeBytes = uint64_t{1} << 30;

// ---- types ----

// A 16-bit little-endian float type: f16 (IEEE binary16) or bf16 (bfloat16).
Handle float16_type(DType dt) {
  Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
  if (dt == DType::f16) {
    H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
    H5Tset_size(t.get(), 2);
    H5Tset_ebias(t.get(), 15);
  } else {
    H5Tset_fields(t.get(), 15, 7, 8, 0, 7);
    H5Tset_size(t.get(), 2);
    H5Tset_ebias(t.get(), 127);
  }
  return t;
}

// The HDF5 type a dtype is stored as (and read into), as an owned copy.
Handle storage_type(DType dt) {
  const auto predefined = [](hid_t id) { return Handle(H5Tcopy(id), H5Tclose); };
  switch (dt) {
    case DType::f32: return predefined(H5T_IEEE_F32LE);
    case DType::f64: return predefined(H5T_IEEE_F64LE);
    case DType::f16:
    case DType::bf16: return float16_type(dt);
    case DType::i32: return predefined(H5T_STD_I32LE);
    case DType::i64: return predefined(H5T_STD_I64LE);
    case DType::u8: return predefined(H5T_STD_U8LE);
  }
  throw Error("unreachable dtype");
}

Handle string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

// ---- writing ----

void write_string_attribute(hid_t object, const std::string& key, const std::string& value,
                            const std::filesystem::path& path) {
  Handle type = string_type();
  Handle space = check(H5Screate(H5S_SCALAR), H5Sclose, path, "cannot create a dataspace");
  Handle attr = check(H5Acreate2(object, key.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                      path, "cannot create attribute '" + key + "'");
  const char* text = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &text), path, "cannot write attribute '" + key + "'");
}

void write_attribute(hid_t root, const std::string& key, const Attribute& value, const std::filesystem::path& path) {
  const auto write_scalar = [&](hid_t type, const void* data) {
    Handle space = check(H5Screate(H5S_SCALAR), H5Sclose, path, "cannot create a dataspace");
    Handle attr = check(H5Acreate2(root, key.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path,
                        "cannot create attribute '" + key + "'");
    check(H5Awrite(attr.get(), type, data), path, "cannot write attribute '" + key + "'");
  };
  if (const auto* i = std::get_if<int64_t>(&value)) {
    write_scalar(H5T_STD_I64LE, i);
  } else if (const auto* u = std::get_if<uint64_t>(&value)) {
    write_scalar(H5T_STD_U64LE, u);
  } else if (const auto* d = std::get_if<double>(&value)) {
    write_scalar(H5T_IEEE_F64LE, d);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    write_string_attribute(root, key, *s, path);
  } else {
    const auto& list = std::get<std::vector<std::string>>(value);
    std::vector<const char*> pointers;
    for (const std::string& s : list) pointers.push_back(s.c_str());
    const hsize_t n = list.size();
    Handle type = string_type();
    Handle space = check(list.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr), H5Sclose, path,
                         "cannot create a dataspace");
    Handle attr = check(H5Acreate2(root, key.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                        path, "cannot create attribute '" + key + "'");
    if (!list.empty())
      check(H5Awrite(attr.get(), type.get(), pointers.data()), path, "cannot write attribute '" + key + "'");
  }
}

// Writes one dataset and returns where its raw data lies in the file, with their checksum.
ChecksummedTensor write_tensor(hid_t file, const std::string& name, const Tensor& tensor,
                               const std::filesystem::path& path) {
  CNN_CHECK(!name.empty() && name.front() != '/' && name.back() != '/' && name.find("//") == std::string::npos,
            "HDF5 file '", path.string(), "': tensor name '", name,
            "' is not a valid dataset name; use a non-empty name without leading, trailing or doubled '/'");
  CNN_CHECK(tensor.defined(), "HDF5 file '", path.string(), "': tensor '", name, "' is undefined; nothing to save");
  const Tensor host = tensor.to(Device::cpu());
  const Shape& shape = host.shape();
  std::vector<hsize_t> dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(static_cast<hsize_t>(shape[i]));
  Handle space = check(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(shape.rank(), dims.data(), nullptr),
                       H5Sclose, path, "cannot create the dataspace of '" + name + "'");
  Handle type = storage_type(host.dtype());
  Handle lcpl = check(H5Pcreate(H5P_LINK_CREATE), H5Pclose, path, "cannot create a property list");
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle dataset = check(H5Dcreate2(file, name.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                         H5Dclose, path, "cannot create dataset '" + name + "' (is the name used twice?)");
  ChecksummedTensor written{name, 0, 0, 0};
  if (host.numel() > 0) {
    check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, host.data()), path,
          "cannot write dataset '" + name + "'");
    // The file holds the tensor's bytes as they are in memory (the storage type is the memory type),
    // so their checksum is taken here rather than by reading the file back.
    const haddr_t offset = H5Dget_offset(dataset.get());
    if (offset == HADDR_UNDEF) fail(path, "cannot locate the data of dataset '" + name + "'");
    written = {name, static_cast<uint64_t>(offset), host.nbytes(), crc32c(host.data(), host.nbytes())};
  }
  if (host.dtype() == DType::f16 || host.dtype() == DType::bf16)
    write_string_attribute(dataset.get(), "dtype", dtype_name(host.dtype()), path);
  return written;
}

void write_file(const std::filesystem::path& path, const TensorFile& contents, const AfterTensorWritten& after_each) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : contents.tensors) names.push_back(name);
  const uint64_t block_size = checksum_block_size(names);
  Handle fcpl = check(H5Pcreate(H5P_FILE_CREATE), H5Pclose, path, "cannot create a property list");
  check(H5Pset_userblock(fcpl.get(), block_size), path, "cannot reserve the checksum block");
  H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_attr_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path, "cannot create a property list");
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  Handle file = check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose, path,
                      "cannot create the file (does the folder exist, and is it writable?)");
  for (const auto& [key, value] : contents.attributes) write_attribute(file.get(), key, value, path);
  std::vector<ChecksummedTensor> checksums;
  for (const auto& [name, tensor] : contents.tensors) {
    checksums.push_back(write_tensor(file.get(), name, tensor, path));
    if (after_each) after_each(name);
  }
  if (!file.close()) fail(path, "cannot close the file (is the disk full?)");
  write_checksum_table(path, block_size, checksums);
}

// ---- reading ----

// Names of the links of a group, in creation order where the group tracks it, else by name.
std::vector<std::string> link_names(hid_t group, const std::filesystem::path& path) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), path, "cannot list a group");
  H5_index_t index = H5_INDEX_NAME;
  {
    Handle gcpl(H5Gget_create_plist(group), H5Pclose);
    unsigned flags = 0;
    if (gcpl.valid() && H5Pget_link_creation_order(gcpl.get(), &flags) >= 0 && (flags & H5P_CRT_ORDER_INDEXED))
      index = H5_INDEX_CRT_ORDER;
  }
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t length = H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (length < 0) fail(path, "cannot read the name of a link");
    std::string name(static_cast<size_t>(length), '\0');
    H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name.data(), name.size() + 1, H5P_DEFAULT);
    names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> read_strings(hid_t attr, hid_t type, hid_t space, const std::string& key,
                                      const std::filesystem::path& path) {
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  if (count <= 0) return {};
  // Sizes come from the file: bound them before allocating (a damaged file can claim anything).
  const size_t width = H5Tis_variable_str(type) > 0 ? sizeof(char*) : H5Tget_size(type);
  if (width == 0 || static_cast<uint64_t>(count) > kMaxAttributeBytes / width)
    fail(path, "attribute '" + key + "' claims " + std::to_string(count) + " strings of " + std::to_string(width) +
                   " bytes, more than an attribute holds; the file is corrupt");
  std::vector<std::string> out;
  if (H5Tis_variable_str(type) > 0) {
    Handle memtype = string_type();
    std::vector<char*> pointers(static_cast<size_t>(count), nullptr);
    check(H5Aread(attr, memtype.get(), pointers.data()), path, "cannot read attribute '" + key + "'");
    for (char* p : pointers) {
      out.emplace_back(p ? p : "");
      if (p) H5free_memory(p);
    }
  } else {
    std::vector<char> buffer(width * static_cast<size_t>(count));
    check(H5Aread(attr, type, buffer.data()), path, "cannot read attribute '" + key + "'");
    for (hssize_t i = 0; i < count; ++i) {
      const char* begin = buffer.data() + static_cast<size_t>(i) * width;
      size_t length = 0;
      while (length < width && begin[length] != '\0') ++length;
      out.emplace_back(begin, length);
    }
  }
  return out;
}

// Reads one attribute; returns false for kinds a TensorFile does not hold (numeric arrays).
bool read_attribute(hid_t object, const std::string& key, Attribute& value, const std::filesystem::path& path) {
  Handle attr = check(H5Aopen(object, key.c_str(), H5P_DEFAULT), H5Aclose, path, "cannot open attribute '" + key + "'");
  Handle type = check(H5Aget_type(attr.get()), H5Tclose, path, "cannot read the type of attribute '" + key + "'");
  Handle space = check(H5Aget_space(attr.get()), H5Sclose, path, "cannot read the shape of attribute '" + key + "'");
  const bool scalar = H5Sget_simple_extent_type(space.get()) == H5S_SCALAR;
  switch (H5Tget_class(type.get())) {
    case H5T_STRING: {
      std::vector<std::string> strings = read_strings(attr.get(), type.get(), space.get(), key, path);
      if (scalar)
        value = strings.empty() ? std::string() : strings.front();
      else
        value = std::move(strings);
      return true;
    }
    case H5T_INTEGER: {
      if (H5Sget_simple_extent_npoints(space.get()) != 1) return false;
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
        uint64_t u = 0;
        check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &u), path, "cannot read attribute '" + key + "'");
        value = u;
      } else {
        int64_t i = 0;
        check(H5Aread(attr.get(), H5T_NATIVE_INT64, &i), path, "cannot read attribute '" + key + "'");
        value = i;
      }
      return true;
    }
    case H5T_FLOAT: {
      if (H5Sget_simple_extent_npoints(space.get()) != 1) return false;
      double d = 0;
      check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &d), path, "cannot read attribute '" + key + "'");
      value = d;
      return true;
    }
    default: return false;
  }
}

std::string dtype_attribute(hid_t dataset, const std::filesystem::path& path) {
  if (H5Aexists(dataset, "dtype") <= 0) return "";
  Attribute value;
  if (!read_attribute(dataset, "dtype", value, path)) return "";
  const auto* text = std::get_if<std::string>(&value);
  return text ? *text : "";
}

// The dtype a dataset is loaded as.
DType dataset_dtype(hid_t dataset, hid_t type, const std::string& name, const std::filesystem::path& path) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size == 8) return DType::f64;
      if (size == 4) return DType::f32;
      if (size == 2) {
        const std::string declared = dtype_attribute(dataset, path);
        if (declared == "bf16" || (declared.empty() && H5Tget_ebias(type) == 127)) return DType::bf16;
        return DType::f16;
      }
      break;
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
      if (size == 1 && !is_signed) return DType::u8;
      if (size < 4 || (size == 4 && is_signed)) return DType::i32;
      if (size == 4 || (size == 8 && is_signed)) return DType::i64;
      break;
    }
    default: break;
  }
  fail(path, "dataset '" + name + "' has an element type (HDF5 class " + std::to_string(H5Tget_class(type)) + ", " +
                 std::to_string(size) +
                 " bytes) that no tensor dtype holds; tensors are f32, f64, f16, bf16, i32, i64 or u8");
}

// Refuses a dataset whose shape needs more bytes than the file can hold (a damaged shape would
// otherwise allocate that much): uncompressed data must all be in the file; compressed data may
// expand by deflate's largest ratio (about 1032:1).
void check_stored_size(hid_t dataset, const std::string& name, uint64_t bytes, const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  const bool filtered = dcpl.valid() && H5Pget_nfilters(dcpl.get()) > 0;
  const uint64_t limit = filtered ? file_size * 1032 : file_size;
  if (!ec && bytes > limit)
    fail(path, "dataset '" + name + "' claims " + std::to_string(bytes) + " bytes of data but the file is only " +
                   std::to_string(file_size) + " bytes long; the file is truncated or corrupt");
}

Tensor read_tensor(hid_t dataset, const std::string& name, const std::filesystem::path& path) {
  Handle type = check(H5Dget_type(dataset), H5Tclose, path, "cannot read the type of dataset '" + name + "'");
  const DType dt = dataset_dtype(dataset, type.get(), name, path);
  Handle space = check(H5Dget_space(dataset), H5Sclose, path, "cannot read the shape of dataset '" + name + "'");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail(path, "cannot read the shape of dataset '" + name + "'");
  CNN_CHECK(rank <= Shape::kMaxDims, "HDF5 file '", path.string(), "': dataset '", name, "' has ", rank,
            " dimensions; tensors have at most ", Shape::kMaxDims);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> shape(dims.begin(), dims.end());
  CNN_CHECK(std::all_of(dims.begin(), dims.end(), [](hsize_t d) { return d <= static_cast<hsize_t>(kMaxElements); }) &&
                element_count(shape).has_value(),
            "HDF5 file '", path.string(), "': dataset '", name, "' claims more elements than a tensor can hold (2^60); the file is corrupt");
  check_stored_size(dataset, name, static_cast<uint64_t>(*element_count(shape)) * dtype_size(dt), path);
  Tensor tensor = Tensor::empty(Shape(shape), dt);
  if (tensor.numel() > 0) {
    Handle memtype = storage_type(dt);
    check(H5Dread(dataset, memtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.data()), path,
          "cannot read dataset '" + name + "' (is the file truncated?)");
  }
  return tensor;
}

void read_group(hid_t group, const std::string& prefix, TensorFile& out, const std::filesystem::path& path) {
  for (const std::string& link : link_names(group, path)) {
    const std::string name = prefix + link;
    Handle object = check(H5Oopen(group, link.c_str(), H5P_DEFAULT), H5Oclose, path, "cannot open '" + name + "'");
    switch (H5Iget_type(object.get())) {
      case H5I_DATASET: out.tensors.emplace_back(name, read_tensor(object.get(), name, path)); break;
      case H5I_GROUP: read_group(object.get(), name + "/", out, path); break;
      default: break;  // named datatypes hold no data
    }
  }
}

void read_root_attributes(hid_t root, TensorFile& out, const std::filesystem::path& path) {
  H5O_info_t info;
#if H5_VERSION_GE(1, 12, 0)
  check(H5Oget_info3(root, &info, H5O_INFO_NUM_ATTRS), path, "cannot read the root group");
#else
  check(H5Oget_info2(root, &info, H5O_INFO_NUM_ATTRS), path, "cannot read the root group");
#endif
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    const ssize_t length = H5Aget_name_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (length < 0) fail(path, "cannot read the name of an attribute");
    std::string key(static_cast<size_t>(length), '\0');
    H5Aget_name_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_INC, i, key.data(), key.size() + 1, H5P_DEFAULT);
    Attribute value;
    if (read_attribute(root, key, value, path)) out.attributes[key] = std::move(value);
  }
}

// Each tensor read from a checksummed file against its entry in the table (the bytes read are the
// bytes stored: the file's element types are the tensors' own), and the table against the datasets.
void verify_tensors(const TensorFile& file, const ChecksumTable& table, const std::filesystem::path& path) {
  std::map<std::string, const ChecksummedTensor*> entries;
  for (const ChecksummedTensor& t : table.tensors) entries.emplace(t.name, &t);
  for (const auto& [name, tensor] : file.tensors) {
    const auto it = entries.find(name);
    if (it == entries.end())
      fail(path, "dataset '" + name + "' is not in the file's checksum table; the file is corrupt or was modified");
    const ChecksummedTensor& entry = *it->second;
    if (entry.size != tensor.nbytes() || (entry.size > 0 && crc32c(tensor.data(), tensor.nbytes()) != entry.crc))
      fail(path, "tensor '" + name + "' is damaged: its data do not match the checksum written with it. The file is "
                 "corrupt; use another copy or checkpoint");
    entries.erase(it);
  }
  if (!entries.empty())
    fail(path, "tensor '" + entries.begin()->first + "' is in the checksum table but not in the file; the file is corrupt");
}

template <class T>
const T& typed_attribute(const TensorFile& file, const std::string& key, const char* kind) {
  const auto it = file.attributes.find(key);
  CNN_CHECK(it != file.attributes.end(), file.source, ": attribute '", key,
            "' is missing; was the file written by a different program or version?");
  const T* value = std::get_if<T>(&it->second);
  CNN_CHECK(value != nullptr, file.source, ": attribute '", key, "' is not ", kind);
  return *value;
}

}  // namespace

int64_t TensorFile::integer(const std::string& key) const {
  return typed_attribute<int64_t>(*this, key, "a signed integer");
}
uint64_t TensorFile::unsigned_integer(const std::string& key) const {
  return typed_attribute<uint64_t>(*this, key, "an unsigned integer");
}
double TensorFile::real(const std::string& key) const { return typed_attribute<double>(*this, key, "a real number"); }
const std::string& TensorFile::text(const std::string& key) const {
  return typed_attribute<std::string>(*this, key, "a string");
}
const std::vector<std::string>& TensorFile::texts(const std::string& key) const {
  return typed_attribute<std::vector<std::string>>(*this, key, "a list of strings");
}

void save_hdf5(const std::filesystem::path& path, const TensorFile& file, const AfterTensorWritten& after_each) {
  QuietErrors quiet;
  write_atomically(path, [&](const std::filesystem::path& tmp) { write_file(tmp, file, after_each); });
}

TensorFile load_hdf5(const std::filesystem::path& path) {
  QuietErrors quiet;
  std::error_code ec;
  CNN_CHECK(std::filesystem::is_regular_file(path, ec), "HDF5 file '", path.string(),
            "' does not exist (or is not a regular file); check the path");
  // A file cnn wrote is checked against its checksum table before HDF5 reads any of it.
  const std::optional<ChecksumTable> table = read_checksum_table(path);
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0)
    fail(path, "is not an HDF5 file (no HDF5 signature: another format, or a file truncated or overwritten)");
  if (!table && !starts_with_hdf5_signature(path))
    fail(path, "has a user block before its HDF5 data that does not hold cnn's checksum table: its first bytes are "
               "damaged, or another program wrote it with a user block (save it again without one, e.g. with h5py)");
  if (!table) check_foreign_superblock(path);  // a file cnn did not write: its superblock, before HDF5 trusts it
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path, "cannot create a property list");
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  Handle file = check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose, path,
                      "cannot open the file (truncated or corrupt?)");
  TensorFile out;
  out.source = "HDF5 file '" + path.string() + "'";
  Handle root = check(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose, path, "cannot open the root group");
  read_root_attributes(root.get(), out, path);
  read_group(root.get(), "", out, path);
  if (table) verify_tensors(out, *table, path);
  out.checksummed = table.has_value();
  return out;
}

}  // namespace cnn::io
