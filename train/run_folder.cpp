// Finding or making the run folder and the checkpoint to resume from, and writing config.ini and
// classes.txt there (see run_folder.h).
#include "train/run_folder.h"

#include <cctype>
#include <optional>
#include <sstream>
#include <string_view>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "train/checkpoint.h"
#include "train/run_lock.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
// The folder name of a run: <YYYYmmdd_HHMMSS>[-N]_<name>, -N (2, 3, ...) when an earlier run of the
// same name started in the same second. The stamp has a fixed form, so the name that follows it is
// matched exactly: run "baseline" never takes the folder of run "wide_baseline".
struct FolderStamp {
  std::string time;  // YYYYmmdd_HHMMSS
  int64_t number = 1;
  bool operator<(const FolderStamp& other) const { return time != other.time ? time < other.time : number < other.number; }
};

std::optional<FolderStamp> stamp_of_run_folder(const std::string& folder, const std::string& name) {
  static constexpr size_t kTimeLength = 15;  // YYYYmmdd_HHMMSS
  if (folder.size() <= kTimeLength) return std::nullopt;
  for (size_t i = 0; i < kTimeLength; ++i)
    if (i == 8 ? folder[i] != '_' : !std::isdigit(static_cast<unsigned char>(folder[i]))) return std::nullopt;
  FolderStamp stamp{folder.substr(0, kTimeLength)};
  size_t at = kTimeLength;
  if (folder[at] == '-') {
    const size_t digits = folder.find_first_not_of("0123456789", at + 1);
    if (digits == std::string::npos || digits == at + 1 || digits - at > 7) return std::nullopt;
    stamp.number = std::stoll(folder.substr(at + 1, digits - at - 1));
    at = digits;
  }
  const std::string_view rest = std::string_view(folder).substr(at);
  if (rest.size() != name.size() + 1 || rest.front() != '_' || rest.substr(1) != name) return std::nullopt;
  return stamp;
}

// resume = auto: the newest folder of run `name` in `dir` that holds a last.h5 ("" when none).
std::filesystem::path latest_run_with_checkpoint(const std::filesystem::path& dir, const std::string& name) {
  std::filesystem::path best;
  std::optional<FolderStamp> newest;
  std::error_code ignored;
  if (!std::filesystem::is_directory(dir, ignored)) return best;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::optional<FolderStamp> stamp = stamp_of_run_folder(entry.path().filename().string(), name);
    if (stamp && std::filesystem::exists(last_checkpoint_path(entry.path()), ignored) && (!newest || *newest < *stamp)) {
      newest = stamp;
      best = entry.path();
    }
  }
  return best;
}

// A new run's folder, made atomically so that two runs of one name started in the same second (in
// parallel too) never share one: the second gets <stamp>-2_<name>, and so on.
std::filesystem::path make_new_run_folder(const std::filesystem::path& parent, const std::string& name) {
  std::filesystem::create_directories(parent);
  const std::string time = timestamp("%Y%m%d_%H%M%S");
  for (int64_t number = 1; number <= 1000; ++number) {
    std::ostringstream folder;  // (a stream: GCC 12 warns wrongly about -Wrestrict on "-" + to_string)
    folder << time;
    if (number > 1) folder << '-' << number;
    folder << '_' << name;
    const std::filesystem::path dir = parent / folder.str();
    if (std::filesystem::create_directory(dir)) return dir;
  }
  throw Error("cannot make a run folder for '" + name + "' in " + parent.string() +
              ": 1000 folders of that name were started within this second");
}

// A resumed run writes into its folder (config.ini, train.log, metrics.jsonl, checkpoints): files
// there that are links would carry those writes into another run (a copy made with cp -s).
void refuse_linked_run_files(const std::filesystem::path& dir) {
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored))
    CNN_CHECK(!entry.is_symlink(ignored), "cannot resume in ", dir.string(), ": ", entry.path().filename().string(),
              " is a symbolic link (to ", std::filesystem::read_symlink(entry.path(), ignored).string(),
              "), and the resumed run would write through it into another folder; copy the run with cp -a, not cp -s");
}
}  // namespace

std::filesystem::path RunFolder::last_checkpoint() const { return last_checkpoint_path(dir); }
std::filesystem::path RunFolder::best_checkpoint() const { return best_checkpoint_path(dir); }

RunFolder open_run_folder(const RunSettings& settings, const std::string& resume_option) {
  const std::string resume = resume_option.empty() ? settings.resume : resume_option;
  RunFolder folder;
  std::error_code ignored;
  if (!resume.empty() && resume != "auto") {
    // Checked before anything is made or locked: a refused resume leaves nothing behind.
    const std::filesystem::path given(resume);
    const bool is_folder = std::filesystem::is_directory(given, ignored);
    folder.dir = is_folder ? given : given.parent_path();
    folder.resume_from = is_folder ? last_checkpoint_path(given) : given;
    CNN_CHECK(std::filesystem::exists(folder.resume_from, ignored), "cannot resume from ", resume, ": ", folder.resume_from.string(),
              " does not exist (a run folder holds last.h5 once an epoch has finished)");
  } else if (resume == "auto") {
    folder.dir = latest_run_with_checkpoint(settings.parent, settings.name);
    if (!folder.dir.empty()) folder.resume_from = last_checkpoint_path(folder.dir);
  }
  if (folder.dir.empty()) {
    folder.dir = make_new_run_folder(settings.parent, settings.name);
    folder.created = true;
  } else {
    refuse_linked_run_files(folder.dir);
  }
  folder.lock = lock_run_folder(folder.dir);
  return folder;
}

void write_run_description(const RunFolder& folder, const std::string& resolved_ini, const std::vector<std::string>& class_names) {
  io::write_text_atomically(folder.dir / "config.ini", resolved_ini);
  std::string classes;
  for (const std::string& name : class_names) classes += name + "\n";
  io::write_text_atomically(folder.dir / "classes.txt", classes);
}

}  // namespace cnn::train
