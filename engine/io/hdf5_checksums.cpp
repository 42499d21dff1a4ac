// Writing and checking the checksum table in the user block of cnn's HDF5 files (see
// hdf5_checksums.h for the layout). Only standard file I/O here: the table is read and verified
// without HDF5, before HDF5 sees the file.
#include "engine/io/hdf5_checksums.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <set>
#include <string_view>

#include "engine/error.h"
#include "engine/io/crc32c.h"

namespace cnn::io {

namespace {

constexpr std::string_view kMagic = "cnn checksums 1 crc32c";
constexpr std::array<unsigned char, 8> kHdf5Signature = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr uint64_t kMinBlock = 512;         // HDF5's smallest user block
constexpr uint64_t kMaxBlock = uint64_t{1} << 30;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error("HDF5 file '" + path.string() + "': " + what);
}

std::string decimal(uint64_t value) { return std::to_string(value); }

// Non-empty tensors sorted by offset: the byte ranges that the metadata checksum skips.
std::vector<const ChecksummedTensor*> data_ranges(const std::vector<ChecksummedTensor>& tensors) {
  std::vector<const ChecksummedTensor*> ranges;
  for (const ChecksummedTensor& t : tensors)
    if (t.size > 0) ranges.push_back(&t);
  std::sort(ranges.begin(), ranges.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
  return ranges;
}

// crc32c of the bytes [begin, end) of `file` that lie outside every range (sorted, inside the span,
// not overlapping: checked by the callers).
uint32_t metadata_checksum(std::istream& file, uint64_t begin, uint64_t end,
                           const std::vector<const ChecksummedTensor*>& ranges, const std::filesystem::path& path) {
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  const auto add = [&](uint64_t from, uint64_t to) {
    file.seekg(static_cast<std::streamoff>(from));
    while (from < to) {
      const auto n = static_cast<std::streamsize>(std::min<uint64_t>(buffer.size(), to - from));
      if (!file.read(buffer.data(), n)) fail(path, "cannot read the file to check its checksums");
      crc = crc32c_extend(crc, buffer.data(), static_cast<size_t>(n));
      from += static_cast<uint64_t>(n);
    }
  };
  uint64_t at = begin;
  for (const ChecksummedTensor* r : ranges) {
    add(at, r->offset);
    at = r->offset + r->size;
  }
  add(at, end);
  return crc;
}

// Appends the words separated by spaces, and a line break.
void add_line(std::string& text, std::initializer_list<std::string_view> words) {
  bool first = true;
  for (const std::string_view word : words) {
    if (!first) text += ' ';
    text += word;
    first = false;
  }
  text += '\n';
}

std::string table_text(const ChecksumTable& table) {
  std::string text;
  add_line(text, {kMagic, "block", decimal(table.block_size), "size", decimal(table.file_size)});
  add_line(text, {"metadata", crc32c_hex(table.metadata_crc)});
  for (const ChecksummedTensor& t : table.tensors)
    add_line(text, {"tensor", crc32c_hex(t.crc), decimal(t.offset), decimal(t.size), t.name});
  add_line(text, {"end", crc32c_hex(crc32c(text))});
  return text;
}

// Splits off the next space-separated word of `line`.
std::string_view next_word(std::string_view& line) {
  const size_t space = line.find(' ');
  const std::string_view word = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return word;
}

bool parse_decimal(std::string_view text, uint64_t& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// Parses "<magic> block B size S" and checks that B is a valid user block size for a file of S bytes.
void parse_first_line(std::string_view line, ChecksumTable& table, uint64_t file_size,
                      const std::filesystem::path& path) {
  line.remove_prefix(kMagic.size());
  const auto bad = [&] { fail(path, "the first line of its checksum table is damaged; the file is corrupt"); };
  if (next_word(line) != "" || next_word(line) != "block" || !parse_decimal(next_word(line), table.block_size) ||
      next_word(line) != "size" || !parse_decimal(next_word(line), table.file_size) || !line.empty())
    bad();
  if (table.block_size < kMinBlock || table.block_size > kMaxBlock || (table.block_size & (table.block_size - 1)))
    bad();
  if (table.file_size != file_size)
    fail(path, "is " + decimal(file_size) + " bytes long but was written with " + decimal(table.file_size) +
                   (file_size < table.file_size ? " (truncated: copy it again, or resume from another checkpoint)"
                                                : " (bytes were appended to it)"));
}

}  // namespace

uint64_t checksum_block_size(const std::vector<std::string>& tensor_names) {
  uint64_t bytes = kMagic.size() + 64 + 20 + 20;  // first, metadata and end lines
  for (const std::string& name : tensor_names) bytes += 7 + 9 + 21 + 21 + name.size() + 1;
  uint64_t block = kMinBlock;
  while (block < bytes) block *= 2;
  return block;
}

void write_checksum_table(const std::filesystem::path& path, uint64_t block_size,
                          const std::vector<ChecksummedTensor>& tensors) {
  ChecksumTable table;
  table.block_size = block_size;
  table.tensors = tensors;
  std::error_code ec;
  table.file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size to write the checksums: " + ec.message());
  const std::vector<const ChecksummedTensor*> ranges = data_ranges(tensors);
  uint64_t at = block_size;
  for (const ChecksummedTensor* r : ranges) {
    CNN_CHECK(r->offset >= at && r->offset + r->size <= table.file_size, "HDF5 file '", path.string(),
              "': the data of '", r->name, "' is not where HDF5 said (internal error)");
    at = r->offset + r->size;
  }
  for (const ChecksummedTensor& t : tensors)
    CNN_CHECK(t.name.find('\n') == std::string::npos, "HDF5 file '", path.string(), "': tensor name '", t.name,
              "' holds a line break; give it a name without one");
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) fail(path, "cannot reopen the file to write its checksums");
  table.metadata_crc = metadata_checksum(file, block_size, table.file_size, ranges, path);
  std::string text = table_text(table);
  CNN_CHECK(text.size() <= block_size, "HDF5 file '", path.string(), "': the checksum table (", text.size(),
            " bytes) does not fit its ", block_size, "-byte block (internal error)");
  text.resize(block_size, '\0');
  file.seekp(0);
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file) fail(path, "cannot write its checksums (is the disk full?)");
}

std::optional<ChecksumTable> read_checksum_table(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  std::ifstream file(path, std::ios::binary);
  if (!file) fail(path, "cannot be opened for reading (check its permissions)");
  std::string head(static_cast<size_t>(std::min<uint64_t>(file_size, kMinBlock)), '\0');
  file.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (head.compare(0, kMagic.size(), kMagic) != 0) return std::nullopt;

  ChecksumTable table;
  parse_first_line(std::string_view(head).substr(0, head.find('\n')), table, file_size, path);
  std::string block(static_cast<size_t>(table.block_size), '\0');
  file.seekg(0);
  if (!file.read(block.data(), static_cast<std::streamsize>(block.size())))
    fail(path, "cannot read its checksum table (truncated?)");
  const size_t end_line = block.find("\nend ");
  if (end_line == std::string::npos) fail(path, "its checksum table has no end line; the file is corrupt");
  std::string_view end_rest = std::string_view(block).substr(end_line + 5, 9);
  uint32_t own = 0;
  if (end_rest.size() != 9 || end_rest[8] != '\n' || !parse_crc32c_hex(end_rest.substr(0, 8), own) ||
      own != crc32c(block.data(), end_line + 1))
    fail(path, "its checksum table is damaged (its own checksum does not match); the file is corrupt");

  // The lines are intact; read them.
  std::string_view lines = std::string_view(block).substr(0, end_line + 1);
  lines.remove_prefix(lines.find('\n') + 1);
  std::set<std::string_view> names;
  bool has_metadata = false;
  while (!lines.empty()) {
    std::string_view line = lines.substr(0, lines.find('\n'));
    lines.remove_prefix(line.size() + 1);
    const std::string_view kind = next_word(line);
    const auto bad = [&] { fail(path, "its checksum table has a line it cannot read ('" + std::string(kind) + " ...')"); };
    if (kind == "metadata") {
      if (!parse_crc32c_hex(line, table.metadata_crc)) bad();
      has_metadata = true;
    } else if (kind == "tensor") {
      ChecksummedTensor t;
      if (!parse_crc32c_hex(next_word(line), t.crc) || !parse_decimal(next_word(line), t.offset) ||
          !parse_decimal(next_word(line), t.size) || line.empty() || !names.insert(line).second)
        bad();
      t.name = std::string(line);
      if (t.size > 0 && (t.offset < table.block_size || t.offset > file_size || t.size > file_size - t.offset)) bad();
      table.tensors.push_back(std::move(t));
    } else {
      bad();
    }
  }
  if (!has_metadata) fail(path, "its checksum table has no metadata line; the file is corrupt");
  const std::vector<const ChecksummedTensor*> ranges = data_ranges(table.tensors);
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i]->offset < ranges[i - 1]->offset + ranges[i - 1]->size)
      fail(path, "its checksum table gives overlapping data for '" + ranges[i - 1]->name + "' and '" +
                     ranges[i]->name + "'; the file is corrupt");
  if (metadata_checksum(file, table.block_size, file_size, ranges, path) != table.metadata_crc)
    fail(path, "its metadata (HDF5 structures, names, shapes and attributes such as the config, step and class "
               "names) is damaged: the checksum does not match. The file is corrupt; use another copy or checkpoint");
  return table;
}

bool starts_with_hdf5_signature(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::array<char, kHdf5Signature.size()> head{};
  if (!file.read(head.data(), head.size())) return false;
  return std::equal(kHdf5Signature.begin(), kHdf5Signature.end(), head.begin(),
                    [](unsigned char s, char c) { return s == static_cast<unsigned char>(c); });
}

}  // namespace cnn::io
