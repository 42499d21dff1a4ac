// Finding or making the run folder and the checkpoint to resume from, and writing config.ini and
// classes.txt there (see run_folder.h).
#include "train/run_folder.h"

#include <fstream>

#include "engine/error.h"
#include "train/checkpoint.h"
#include "train/run_lock.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
// resume = auto: the newest <dir>/<timestamp>_<name> folder that holds a last.h5 ("" when none).
std::filesystem::path latest_run_with_checkpoint(const std::filesystem::path& dir, const std::string& name) {
  std::filesystem::path best;
  if (!std::filesystem::is_directory(dir)) return best;
  const std::string suffix = "_" + name;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string folder = entry.path().filename().string();
    const bool named = folder.size() > suffix.size() && folder.compare(folder.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (named && std::filesystem::exists(last_checkpoint_path(entry.path())) && (best.empty() || entry.path() > best))
      best = entry.path();
  }
  return best;
}
}  // namespace

std::filesystem::path RunFolder::last_checkpoint() const { return last_checkpoint_path(dir); }
std::filesystem::path RunFolder::best_checkpoint() const { return best_checkpoint_path(dir); }

RunFolder open_run_folder(const RunSettings& settings, const std::string& resume_option) {
  const std::string resume = resume_option.empty() ? settings.resume : resume_option;
  RunFolder folder;
  if (!resume.empty() && resume != "auto") {
    const std::filesystem::path given(resume);
    folder.dir = std::filesystem::is_directory(given) ? given : given.parent_path();
  } else if (resume == "auto") {
    folder.dir = latest_run_with_checkpoint(settings.parent, settings.name);
  }
  if (folder.dir.empty()) folder.dir = std::filesystem::path(settings.parent) / (timestamp("%Y%m%d_%H%M%S") + "_" + settings.name);
  folder.created = std::filesystem::create_directories(folder.dir);
  folder.lock = lock_run_folder(folder.dir);
  if (!resume.empty())
    folder.resume_from = std::filesystem::is_directory(resume) ? last_checkpoint_path(resume) : resolve_resume(resume, folder.dir);
  CNN_CHECK(folder.resume_from.empty() || std::filesystem::exists(folder.resume_from), "cannot resume from ", resume, ": ",
            folder.resume_from.string(), " does not exist (a run folder holds last.h5 once an epoch has finished)");
  return folder;
}

void write_run_description(const RunFolder& folder, const std::string& resolved_ini, const std::vector<std::string>& class_names) {
  std::ofstream(folder.dir / "config.ini") << resolved_ini;
  std::ofstream classes(folder.dir / "classes.txt");
  for (const std::string& name : class_names) classes << name << "\n";
}

}  // namespace cnn::train
