// The run's stop on unreadable data: an epoch whose training images, or whose validation images,
// were mostly corrupt (docs/data.md). Training on nothing would save an untrained model, and a
// validation over what happened to decode would rate the model (and pick best.h5) on a part of
// the validation set without saying so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn::train {

// The images an epoch read from one dataset: which set ("training" or "validation"), the counts
// over all ranks, the unreadable files found so far (a few are named) and the dataset's spec.
struct ImagesRead {
  const char* set = "training";
  int64_t corrupt = 0, delivered = 0;
  std::vector<std::string> found;
  std::string data_spec;
};

// A cnn::Error when the epoch delivered no image of the set at all, or when more than
// `max_fraction` ([data] max_corrupt_fraction) of the images it read were unreadable.
void check_corrupt_images(int64_t epoch_number, const ImagesRead& read, double max_fraction);

}  // namespace cnn::train
