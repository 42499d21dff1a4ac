// safetensors reading and writing (see safetensors.h): JSON header through nlohmann-json, tensor
// bytes streamed straight between the file and tensor memory.
#include "engine/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/crc32c.h"

namespace cnn::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian, as is the host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

const std::pair<DType, const char*> kDTypeNames[] = {{DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"},
                                                     {DType::bf16, "BF16"}, {DType::i32, "I32"}, {DType::i64, "I64"},
                                                     {DType::u8, "U8"}};

const char* safetensors_name(DType dt) {
  for (const auto& [d, name] : kDTypeNames)
    if (d == dt) return name;
  throw Error("unreachable dtype");
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error("safetensors file '" + path.string() + "': " + what);
}

// The metadata entry that holds the checksums of the files cnn writes: a JSON object (as a string,
// since safetensors metadata values are strings) from each tensor's name to the CRC32C of its dtype,
// shape and data, plus kMetadataKey for the CRC32C of the other metadata entries. Other readers
// ignore it; files without it (from other programs) load unverified.
constexpr const char* kChecksumsKey = "cnn.crc32c";
constexpr const char* kMetadataKey = "__metadata__";

// A tensor's checksum covers its header entry too, so that a damaged dtype or shape whose byte count
// still matches is caught.
uint32_t tensor_checksum(const char* dtype, const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  std::string entry = dtype;
  for (const int64_t d : shape) {
    entry += ' ';
    entry += std::to_string(d);
  }
  entry += '\n';
  return crc32c_extend(crc32c(entry), data, bytes);
}

uint32_t metadata_checksum(const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumsKey) continue;
    const std::string line = key + '=' + value + '\n';  // std::map: the same order on both sides
    crc = crc32c_extend(crc, line.data(), line.size());
  }
  return crc;
}

DType parse_safetensors_dtype(const std::string& name, const std::string& tensor, const std::filesystem::path& path) {
  for (const auto& [d, n] : kDTypeNames)
    if (name == n) return d;
  fail(path, "tensor '" + tensor + "' has dtype '" + name +
                 "', which cnn does not hold; supported: F32, F64, F16, BF16, I32, I64, U8 (convert it first)");
}

void write_file(const std::filesystem::path& path, const std::vector<Tensor>& host, const NamedTensors& tensors,
                const std::map<std::string, std::string>& metadata) {
  CNN_CHECK(metadata.count(kChecksumsKey) == 0, "safetensors file '", path.string(), "': the metadata key '",
            kChecksumsKey, "' is reserved for the file's checksums; use another key");
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json checksums = nlohmann::json::object();
  checksums[kMetadataKey] = crc32c_hex(metadata_checksum(metadata));
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    CNN_CHECK(!name.empty() && name != "__metadata__" && !header.contains(name), "safetensors file '", path.string(),
              "': tensor name '", name, "' is empty, reserved or used twice; give every tensor its own name");
    const uint64_t bytes = host[i].nbytes();
    const char* dtype = safetensors_name(host[i].dtype());
    header[name] = {{"dtype", dtype}, {"shape", host[i].shape().to_vector()}, {"data_offsets", {offset, offset + bytes}}};
    checksums[name] = crc32c_hex(tensor_checksum(dtype, host[i].shape().to_vector(), host[i].data(), bytes));
    offset += bytes;
  }
  std::map<std::string, std::string> all_metadata = metadata;
  all_metadata[kChecksumsKey] = checksums.dump();
  header[kMetadataKey] = all_metadata;
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, "cannot create the file (does the folder exist, and is it writable?)");
  out.write(reinterpret_cast<const char*>(&length), sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& t : host) out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  out.close();
  if (!out) fail(path, "writing failed (is the disk full?)");
}

struct Entry {
  std::string name;
  std::string dtype_name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const nlohmann::json& info, const std::filesystem::path& path) {
  const auto bad = [&](const std::string& why) { fail(path, "bad header entry for tensor '" + name + "': " + why); };
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
    bad("it needs \"dtype\", \"shape\" and \"data_offsets\"");
  if (!info["dtype"].is_string()) bad("\"dtype\" is not a string");
  const std::string dtype_name = info["dtype"].get<std::string>();
  Entry e{name, dtype_name, parse_safetensors_dtype(dtype_name, name, path), {}, 0, 0};
  const nlohmann::json& shape = info["shape"];
  if (!shape.is_array() || shape.size() > static_cast<size_t>(Shape::kMaxDims))
    bad("\"shape\" is not an array of at most " + std::to_string(Shape::kMaxDims) + " sizes");
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMaxElements))
      bad("\"shape\" holds something other than a non-negative integer of at most 2^60");
    e.shape.push_back(d.get<int64_t>());
  }
  const std::optional<int64_t> count = element_count(e.shape);
  if (!count) bad("\"shape\" " + shape.dump() + " has more elements than a tensor can hold (2^60)");
  const auto numel = static_cast<uint64_t>(*count);
  const nlohmann::json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    bad("\"data_offsets\" is not a pair of non-negative integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != numel * static_cast<uint64_t>(dtype_size(e.dtype)))
    bad("\"data_offsets\" [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") do not span the " +
        std::to_string(numel) + " elements of its shape");
  return e;
}

// The checksum table of a file cnn wrote (null for a file without one), with the metadata's own
// checksum verified.
nlohmann::json read_checksums(const std::map<std::string, std::string>& metadata, const std::filesystem::path& path) {
  const auto it = metadata.find(kChecksumsKey);
  if (it == metadata.end()) return nullptr;
  nlohmann::json table;
  try {
    table = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    fail(path, std::string("its checksum table ('") + kChecksumsKey + "' in the metadata) is damaged");
  }
  uint32_t expected = 0;
  if (!table.is_object() || !table.contains(kMetadataKey) || !table[kMetadataKey].is_string() ||
      !parse_crc32c_hex(table[kMetadataKey].get<std::string>(), expected))
    fail(path, std::string("its checksum table ('") + kChecksumsKey + "' in the metadata) is damaged");
  if (metadata_checksum(metadata) != expected)
    fail(path, "its metadata entries are damaged: their checksum does not match. The file is corrupt; use another copy");
  return table;
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> host;
  for (const auto& [name, t] : tensors) {
    CNN_CHECK(t.defined(), "safetensors file '", path.string(), "': tensor '", name, "' is undefined; nothing to save");
    host.push_back(t.to(Device::cpu()));
  }
  write_atomically(path, [&](const std::filesystem::path& tmp) { write_file(tmp, host, tensors, metadata); });
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "does not exist (or is not a regular file); check the path");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) fail(path, "cannot be opened for reading");
  if (file_size < 8) fail(path, "is " + std::to_string(file_size) + " bytes long, too short for the 8-byte header length (truncated?)");
  uint64_t header_length = 0;
  in.read(reinterpret_cast<char*>(&header_length), sizeof header_length);
  if (header_length > kMaxHeaderBytes || header_length > file_size - 8)
    fail(path, "the header length " + std::to_string(header_length) + " exceeds the file's " +
                   std::to_string(file_size - 8) + " remaining bytes (truncated, or not a safetensors file)");
  std::string text(header_length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_length));
  if (!in) fail(path, "cannot read its header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "the header is not a JSON object");

  SafetensorsFile out;
  out.source = "safetensors file '" + path.string() + "'";
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, "\"__metadata__\" is not an object of strings");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) fail(path, "metadata '" + key + "' is not a string");
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, info, path));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;  // empty tensors first at a shared offset
  });
  const uint64_t data_size = file_size - 8 - header_length;
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin != expected)
      fail(path, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + " of the data, expected " +
                     std::to_string(expected) + " (overlapping or gapped data offsets: a corrupt header)");
    expected = e.end;
  }
  if (expected > data_size)
    fail(path, "the header describes " + std::to_string(expected) + " bytes of data but the file holds " +
                   std::to_string(data_size) + " (truncated?)");
  if (expected < data_size)
    fail(path, std::to_string(data_size - expected) + " bytes follow the last tensor's data (a corrupt header?)");
  const nlohmann::json checksums = read_checksums(out.metadata, path);
  out.checksummed = !checksums.is_null();
  out.metadata.erase(kChecksumsKey);  // the file's own bookkeeping, not the writer's metadata
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(Shape(e.shape), e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + header_length + e.begin));
    in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) fail(path, "cannot read the data of tensor '" + e.name + "'");
    if (out.checksummed) {
      const auto it = checksums.find(e.name);
      uint32_t expected = 0;
      if (it == checksums.end() || !it->is_string() || !parse_crc32c_hex(it->get<std::string>(), expected))
        fail(path, "tensor '" + e.name + "' has no checksum in the file's checksum table; the header is damaged");
      if (tensor_checksum(e.dtype_name.c_str(), e.shape, t.data(), t.nbytes()) != expected)
        fail(path, "tensor '" + e.name + "' is damaged: its dtype, shape or data do not match the checksum written "
                   "with it. The file is corrupt; use another copy");
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  // Every checksummed tensor must be there (one dropped from a damaged header would go unnoticed).
  if (out.checksummed && checksums.size() != entries.size() + 1)
    fail(path, "the checksum table names " + std::to_string(checksums.size() - 1) + " tensors but the header " +
                   std::to_string(entries.size()) + "; the header is damaged");
  return out;
}

}  // namespace cnn::io
