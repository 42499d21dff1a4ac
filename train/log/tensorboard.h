// A TensorBoard event-file writer, written by hand (no protobuf or TensorFlow dependency): the file
// is a sequence of TFRecords (uint64 length, masked CRC-32C of the length, the data, masked CRC-32C
// of the data), each holding one serialised tensorflow.Event. The first event carries
// file_version "brain.Event:2"; each scalar is an Event {wall_time, step, summary {value {tag,
// simple_value}}}; an image is a Value {tag, image {height, width, colorspace, encoded PNG}}, a
// histogram a Value {tag, histo {min, max, num, sum, sum_squares, bucket_limit, bucket}}.
// TensorBoard reads any file named events.out.tfevents.* in the run folder.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cnn::train {

// TFRecord's masked CRC-32C of `size` bytes: the checksum (engine/io/crc32c.h) rotated right by 15
// bits plus 0xa282ead8, so that checksums of data that contain checksums stay well distributed.
uint32_t masked_crc32c(const void* data, size_t size);

class EventWriter {
 public:
  // Creates <dir>/events.out.tfevents.<seconds>.<host> (and dir, if needed).
  explicit EventWriter(const std::filesystem::path& dir);
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);  // -1: now
  // `png`: an encoded PNG of height x width with `channels` (1 grey, 3 RGB, 4 RGBA).
  void add_image(const std::string& tag, const std::vector<uint8_t>& png, int height, int width, int channels, int64_t step);
  // The values' distribution in `buckets` equal-width buckets between their minimum and maximum.
  void add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step, int buckets = 30);
  void flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::filesystem::path path_;
  std::ofstream out_;
};

// Protobuf encodings of the Event fields used above, exposed for the format tests.
namespace event_encoding {
std::string file_version_event(double wall_time, const std::string& version);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
std::string image_event(double wall_time, int64_t step, const std::string& tag, const std::vector<uint8_t>& png, int height,
                        int width, int channels);
std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const std::vector<double>& values,
                            int buckets);
std::string tfrecord(const std::string& data);  // the framing around one record
}  // namespace event_encoding

// Seconds since the epoch, with sub-second precision.
double wall_time_now();

}  // namespace cnn::train
