// TensorBoard event files: the protobuf wire format of the few Event/Summary fields needed
// (varints, fixed 32/64-bit values, length-delimited strings and messages) and TFRecord framing.
#include "train/log/tensorboard.h"

#include <unistd.h>

#include <algorithm>
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
// An Event holding a Summary with one Value (already encoded).
std::string summary_event(double wall_time, int64_t step, const std::string& value) {
  std::string summary;  // Summary: 1 value (repeated Value)
  put_bytes(summary, 1, value);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
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
  return summary_event(wall_time, step, v);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag, const std::vector<uint8_t>& png, int height,
                        int width, int channels) {
  std::string image;  // Summary.Image: 1 height, 2 width, 3 colorspace (channels), 4 encoded_image_string
  put_tag(image, 1, 0);
  put_varint(image, static_cast<uint64_t>(height));
  put_tag(image, 2, 0);
  put_varint(image, static_cast<uint64_t>(width));
  put_tag(image, 3, 0);
  put_varint(image, static_cast<uint64_t>(channels));
  put_bytes(image, 4, std::string(png.begin(), png.end()));
  std::string v;  // Summary.Value: 1 tag, 4 image
  put_bytes(v, 1, tag);
  put_bytes(v, 4, image);
  return summary_event(wall_time, step, v);
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const std::vector<double>& values,
                            int buckets) {
  double lo = values.empty() ? 0.0 : values.front(), hi = lo, sum = 0, squares = 0;
  for (const double x : values) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    squares += x * x;
  }
  // Equal-width buckets; bucket i counts values up to bucket_limit[i] (the last one includes hi).
  const int n = std::max(1, buckets);
  const double width = hi > lo ? (hi - lo) / n : 1.0;
  std::vector<double> counts(static_cast<size_t>(n), 0.0);
  for (const double x : values) counts[static_cast<size_t>(std::clamp(static_cast<int>((x - lo) / width), 0, n - 1))] += 1;
  std::string limits, bucket_counts;
  for (int i = 0; i < n; ++i) {
    put_fixed(limits, i == n - 1 ? std::max(hi, lo + width * n) : lo + width * (i + 1));
    put_fixed(bucket_counts, counts[static_cast<size_t>(i)]);
  }
  std::string h;  // HistogramProto: 1 min, 2 max, 3 num, 4 sum, 5 sum_squares, 6 bucket_limit, 7 bucket (packed)
  const auto put_double = [&](int field, double x) {
    put_tag(h, field, 1);
    put_fixed(h, x);
  };
  put_double(1, lo);
  put_double(2, hi);
  put_double(3, static_cast<double>(values.size()));
  put_double(4, sum);
  put_double(5, squares);
  put_bytes(h, 6, limits);
  put_bytes(h, 7, bucket_counts);
  std::string v;  // Summary.Value: 1 tag, 5 histo
  put_bytes(v, 1, tag);
  put_bytes(v, 5, h);
  return summary_event(wall_time, step, v);
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

void EventWriter::add_image(const std::string& tag, const std::vector<uint8_t>& png, int height, int width, int channels,
                            int64_t step) {
  write_record(event_encoding::image_event(wall_time_now(), step, tag, png, height, width, channels));
}

void EventWriter::add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step, int buckets) {
  write_record(event_encoding::histogram_event(wall_time_now(), step, tag, values, buckets));
}

void EventWriter::flush() { out_.flush(); }

void EventWriter::write_record(const std::string& data) {
  out_ << event_encoding::tfrecord(data);
  CNN_CHECK(out_, "TensorBoard: writing '", path_.string(), "' failed (is the disk full?)");
}

}  // namespace cnn::train
