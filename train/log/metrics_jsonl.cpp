// metrics.jsonl lines through nlohmann-json.
#include "train/log/metrics_jsonl.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "train/log/json_text.h"
#include "train/log/tensorboard.h"

namespace cnn::train {

MetricsJsonl::MetricsJsonl(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  // A run killed while writing a line leaves it without its newline: end it, so that the first
  // line of the resumed run is not glued onto it (the readers pass over the broken line).
  bool cut_short = false;
  if (std::ifstream previous(path, std::ios::binary | std::ios::ate); previous && previous.tellg() > 0) {
    previous.seekg(-1, std::ios::end);
    cut_short = previous.get() != '\n';
  }
  out_.open(path, std::ios::app);
  CNN_CHECK(out_, "metrics: cannot open '", path.string(), "' for appending; check that the run folder is writable");
  if (cut_short) out_ << '\n';
}

void MetricsJsonl::write(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers,
                         const std::map<std::string, std::string>& texts) {
  nlohmann::ordered_json line;
  line["step"] = step;
  line["epoch"] = epoch;
  line["wall_time"] = wall_time_now();
  for (const auto& [name, value] : numbers) {
    if (std::isfinite(value))
      line[name] = value;
    else
      line[name] = nullptr;
  }
  for (const auto& [name, value] : texts) line[name] = value;
  out_ << json_text(line) << '\n';
  out_.flush();
  CNN_CHECK(out_, "metrics: writing '", path_.string(), "' failed (is the disk full?)");
}

}  // namespace cnn::train
