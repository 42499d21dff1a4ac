// TensorBoard event files: the protobuf wire format of the few Event/Summary fields needed
// (varints, fixed 32/64-bit values, length-delimited strings and messages) and TFRecord framing.
#include "train/log/tensorboard.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "engine/error.h"
#include "engine/io/crc32c.h"

namespace cnn::train {

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = io::crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

namespace {
// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_tag(std::string& out, int field, int wire_type) {
  out += static_cast<char>((field << 3) | wire_type);
}
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
template <class T>
void put_fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // little-endian host, as protobuf's fixed fields
  out.append(bytes, sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
// Event fields: 1 wall_time (double), 2 step (int64), 3 file_version (string), 5 summary (Summary).
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_tag(e, 1, 1);
  put_fixed(e, wall_time);
  if (step != 0) {
    put_tag(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}
}  // namespace

namespace event_encoding {
std::string file_version_event(double wall_time, const std::string& version) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, version);
  return e;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;  // Summary.Value: 1 tag (string), 2 simple_value (float)
  put_bytes(v, 1, tag);
  put_tag(v, 2, 5);
  put_fixed(v, value);
  std::string summary;  // Summary: 1 value (repeated Value)
  put_bytes(summary, 1, v);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  const uint64_t length = data.size();
  put_fixed(r, length);
  put_fixed(r, masked_crc32c(&length, sizeof length));
  r += data;
  put_fixed(r, masked_crc32c(data.data(), data.size()));
  return r;
}
}  // namespace event_encoding

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventWriter::EventWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = wall_time_now();
  path_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host);
  out_.open(path_, std::ios::binary | std::ios::app);
  CNN_CHECK(out_, "TensorBoard: cannot create '", path_.string(), "'; check that the run folder is writable");
  write_record(event_encoding::file_version_event(now, "brain.Event:2"));
  flush();
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  write_record(event_encoding::scalar_event(wall_time < 0 ? wall_time_now() : wall_time, step, tag,
                                            static_cast<float>(value)));
}

void EventWriter::flush() { out_.flush(); }

void EventWriter::write_record(const std::string& data) {
  out_ << event_encoding::tfrecord(data);
  CNN_CHECK(out_, "TensorBoard: writing '", path_.string(), "' failed (is the disk full?)");
}

}  // namespace cnn::train
