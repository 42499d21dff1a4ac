// report.html: one self-contained page per run folder (no network access, no script: inline SVG
// charts and PNGs embedded as data URIs) with the run's config, its loss, accuracy and learning-rate
// curves, images/s and data wait per epoch, the confusion matrix with per-class precision, recall and
// F1, the first augmented batch and the most confident mistakes. Everything is read back from the
// files of the run folder (metrics.jsonl, confusion.json, config.ini, classes.txt, samples.png,
// mistakes.png), so the trainer (after every epoch) and cnn_report (any time, for several runs side by
// side on the same curves) make the same page.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cnn::train {

// One metrics.jsonl line: its numbers by name ("train_loss", "val_top1", "lr", ...).
struct MetricsLine {
  int64_t step = 0, epoch = 0;
  std::map<std::string, double> numbers;
  double get(const std::string& name) const;  // NaN when absent
};

struct RunRecord {
  std::filesystem::path dir;
  std::string name;    // the folder's name
  std::string config;  // config.ini
  std::vector<std::string> classes;
  std::vector<MetricsLine> steps, epochs;  // logged steps and epoch lines, in file order
  int64_t broken_metrics_lines = 0;        // lines of metrics.jsonl that are not a JSON object (cut by a kill)
  std::vector<std::vector<int64_t>> confusion;  // rows: truth, columns: predicted; empty before validation
  int64_t confusion_epoch = 0;
  std::map<std::string, std::string> pictures;  // "samples", "mistakes", "confusion": PNG bytes
};

// Reads what the run folder holds; missing files leave their parts empty (a run that has just
// started has a report too). A cnn::Error when `dir` is not a folder, or holds neither config.ini
// nor metrics.jsonl (not a run's folder).
RunRecord read_run(const std::filesystem::path& dir);

// The page: the first run in detail; with several runs, their curves on the same charts first.
std::string report_html(const std::vector<RunRecord>& runs);

// report_html of the runs, written atomically to `path`.
void write_report(const std::filesystem::path& path, const std::vector<RunRecord>& runs);

// Standard base64 (RFC 4648) with padding, for data URIs.
std::string base64(const std::string& bytes);

}  // namespace cnn::train
