// The run folder <run.dir>/<YYYYmmdd_HHMMSS>_<run.name>/, and the checkpoint a run resumes from.
// A resumed run continues in the folder of its checkpoint: --resume RUN_DIR (its last.h5), a
// checkpoint file (its folder), or [checkpoint] resume = auto (the newest folder of the same run
// name that holds a last.h5; a fresh folder when there is none). The trainer writes config.ini and
// classes.txt only once a resumed checkpoint has passed its checks (resume.h).
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace cnn::train {

struct RunSettings;

struct RunFolder {
  std::filesystem::path dir;          // created
  std::filesystem::path resume_from;  // "" : start afresh; else an existing checkpoint file
  std::shared_ptr<void> lock;         // train/run_lock.h: held while the run lives
  bool created = false;               // this call made the folder (a new run, not a resume)
  std::filesystem::path last_checkpoint() const;  // dir/last.h5
  std::filesystem::path best_checkpoint() const;  // dir/best.h5
  std::filesystem::path swa_checkpoint() const { return dir / "swa.h5"; }  // the SWA average at the end
};

// `resume_option` (the command line's --resume) overrides [checkpoint] resume when not empty.
// A cnn::Error when the checkpoint to resume from does not exist, or when another process runs in
// the folder (train/run_lock.h).
RunFolder open_run_folder(const RunSettings& settings, const std::string& resume_option);

// The run's description in its folder: config.ini (the resolved config, --set overrides included:
// what a resume should be given) and classes.txt (a class name per line).
void write_run_description(const RunFolder& folder, const std::string& resolved_ini, const std::vector<std::string>& class_names);

}  // namespace cnn::train
