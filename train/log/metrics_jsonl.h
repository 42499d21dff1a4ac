// metrics.jsonl: one JSON object per line ({"step": 1200, "epoch": 3, "wall_time": ..., "train/loss":
// 1.83, ...}), appended and flushed line by line, so that a crashed or resumed run keeps every line
// it wrote and any tool (jq, pandas.read_json(lines=True)) can read it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace cnn::train {

class MetricsJsonl {
 public:
  explicit MetricsJsonl(const std::filesystem::path& path);  // appends; creates folders as needed

  // Writes one line: step, epoch, wall_time, then the numbers and texts by name. A non-finite
  // number is written as null (JSON has no inf/nan).
  void write(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers,
             const std::map<std::string, std::string>& texts = {});
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace cnn::train
