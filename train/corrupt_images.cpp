// The stop on unreadable data (see corrupt_images.h).
#include "train/corrupt_images.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace cnn::train {

void check_corrupt_images(int64_t epoch_number, const ImagesRead& read, double max_fraction) {
  if (read.corrupt == 0) return;
  const size_t shown = std::min<size_t>(read.found.size(), 3);
  std::string names;
  for (size_t i = 0; i < shown; ++i) names += (i > 0 ? ", " : "") + read.found[i];
  if (read.corrupt > static_cast<int64_t>(shown))
    names += " and " + std::to_string(read.corrupt - static_cast<int64_t>(shown)) + " more";
  const std::string fix = "replace or remove them (cnn_pack --check " + read.data_spec + " lists every unreadable file)";
  const bool training = std::string(read.set) == "training";
  CNN_CHECK(read.delivered > 0, "epoch ", epoch_number, training ? " delivered no image to train on" : " delivered no validation image",
            ": all ", read.corrupt, " ", read.set, " images read were unreadable (", names, "); the run stops rather than ",
            training ? "save an untrained model" : "rate the model on nothing", ": ", fix);
  const int64_t total = read.corrupt + read.delivered;
  const double fraction = static_cast<double>(read.corrupt) / static_cast<double>(total);
  CNN_CHECK(fraction <= max_fraction, "epoch ", epoch_number, ": ", read.corrupt, " of ", total, " ", read.set,
            " images read were unreadable (", std::round(1000 * fraction) / 10, "%, more than [data] max_corrupt_fraction = ",
            max_fraction, "): ", names, "; ", fix, ", or raise [data] max_corrupt_fraction (at most 1) to ",
            training ? "train on the rest" : "validate on the rest");
}

}  // namespace cnn::train
