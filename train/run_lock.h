// One process per run folder: a run holds an exclusive lock on <run folder>/.lock for as long as it
// runs, so that a second cnn_train on the same folder (the same --resume, or resume = auto while the
// first is still training) is refused instead of writing the same checkpoints at the same time. The
// lock is the kernel's (flock): it goes away with the process however it ends, kill -9 included.
#pragma once
#include <filesystem>
#include <memory>

namespace cnn::train {

// Takes the folder's lock; a cnn::Error naming the folder when another process holds it.
std::shared_ptr<void> lock_run_folder(const std::filesystem::path& dir);

}  // namespace cnn::train
