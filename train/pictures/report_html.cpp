// report.html (see report_html.h): the run folder's files read back, then one HTML page written in
// sections, each a function of the RunRecords.
#include "train/pictures/report_html.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "train/pictures/image_grid.h"
#include "train/pictures/svg_chart.h"

namespace cnn::train {

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "&ndash;";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

// Series of one number over the steps (x = optimizer step).
ChartSeries series_of(const std::vector<MetricsLine>& lines, const std::string& number, std::string name, std::string colour,
                      bool dashed = false, double scale = 1.0) {
  ChartSeries s{std::move(name), std::move(colour), {}, dashed};
  for (const MetricsLine& line : lines)
    if (line.numbers.count(number)) s.points.emplace_back(static_cast<double>(line.step), scale * line.get(number));
  return s;
}

bool has(const std::vector<MetricsLine>& lines, const std::string& number) {
  for (const MetricsLine& line : lines)
    if (line.numbers.count(number) && std::isfinite(line.get(number))) return true;
  return false;
}

std::string picture(const RunRecord& run, const std::string& name, const std::string& alt) {
  const auto it = run.pictures.find(name);
  if (it == run.pictures.end()) return "<p class=\"note\">no " + alt + " yet</p>";
  return "<img class=\"picture\" id=\"" + name + "-image\" alt=\"" + escape_html(alt) + "\" src=\"data:image/png;base64," +
         base64(it->second) + "\">";
}

// The charts of one run: loss, accuracy, learning rate, throughput and data wait.
std::string run_curves(const RunRecord& run) {
  Chart loss{"Loss", "step", "cross-entropy", {}};
  loss.series.push_back(series_of(run.steps, "train_loss", "train (logged steps)", "#9ecae1"));
  loss.series.push_back(series_of(run.epochs, "train_loss", "train (epoch mean)", palette(0)));
  loss.series.push_back(series_of(run.epochs, "val_loss", "validation", palette(1)));
  if (has(run.epochs, "ema_val_loss")) loss.series.push_back(series_of(run.epochs, "ema_val_loss", "validation (EMA)", palette(1), true));
  Chart accuracy{"Validation accuracy", "step", "percent", {}};
  accuracy.series.push_back(series_of(run.epochs, "val_top1", "top-1", palette(1)));
  accuracy.series.push_back(series_of(run.epochs, "val_top5", "top-5", palette(2)));
  if (has(run.epochs, "ema_val_top1")) accuracy.series.push_back(series_of(run.epochs, "ema_val_top1", "top-1 (EMA)", palette(1), true));
  Chart lr{"Learning rate", "step", "lr", {series_of(run.steps, "lr", "lr", palette(4))}, true};
  Chart speed{"Throughput", "step", "images/s", {series_of(run.epochs, "images_per_second", "images/s (epoch)", palette(3))}};
  Chart wait{"Data wait", "step", "percent of the epoch",
             {series_of(run.epochs, "data_wait", "waiting for the loader", palette(5), false, 100.0)}};
  return "<div class=\"charts\">" + svg_chart(loss) + svg_chart(accuracy) + svg_chart(lr) + svg_chart(speed) + svg_chart(wait) +
         "</div>";
}

std::string summary_table(const RunRecord& run) {
  double best = std::nan(""), last = std::nan("");
  int64_t best_epoch = 0;
  for (const MetricsLine& e : run.epochs) {
    const double top1 = e.get("val_top1");
    if (!std::isfinite(top1)) continue;
    last = top1;
    if (!std::isfinite(best) || top1 > best) {
      best = top1;
      best_epoch = e.epoch;  // 1-based in metrics.jsonl
    }
  }
  double seconds = 0;
  for (const MetricsLine& e : run.epochs)
    if (std::isfinite(e.get("epoch_seconds"))) seconds += e.get("epoch_seconds");
  const int64_t steps = run.epochs.empty() ? (run.steps.empty() ? 0 : run.steps.back().step) : run.epochs.back().step;
  std::string html = "<table class=\"summary\"><tr><th>epochs</th><td>" + std::to_string(run.epochs.size()) + "</td></tr>";
  html += "<tr><th>optimizer steps</th><td>" + std::to_string(steps) + "</td></tr>";
  html += "<tr><th>training time</th><td>" + fixed(seconds, 1) + " s</td></tr>";
  html += "<tr><th>best val top-1</th><td>" + fixed(best, 2) + "%" + (std::isfinite(best) ? " (epoch " + std::to_string(best_epoch) + ")" : "") +
          "</td></tr>";
  html += "<tr><th>last val top-1</th><td>" + fixed(last, 2) + "%</td></tr></table>";
  if (run.broken_metrics_lines > 0)
    html += "<p class=\"note\">" + std::to_string(run.broken_metrics_lines) +
            " line(s) of metrics.jsonl could not be read (cut short when the run was stopped) and are left out.</p>";
  return html;
}

// The confusion matrix as a table coloured like the heat map, and each class's precision, recall and F1.
std::string confusion_section(const RunRecord& run) {
  const auto& m = run.confusion;
  if (m.empty()) return "<p class=\"note\">no validation yet</p>";
  const size_t n = m.size();
  const auto name = [&](size_t k) { return k < run.classes.size() ? run.classes[k] : std::to_string(k); };
  std::string html = "<p>Epoch " + std::to_string(run.confusion_epoch) + "; rows: true class, columns: predicted; colour: share of the row.</p>";
  if (n <= 50) {
    html += "<table class=\"confusion\" id=\"confusion-table\"><tr><th></th>";
    for (size_t p = 0; p < n; ++p) html += "<th title=\"" + escape_html(name(p)) + "\">" + std::to_string(p) + "</th>";
    html += "</tr>";
    for (size_t t = 0; t < n; ++t) {
      int64_t total = 0;
      for (const int64_t c : m[t]) total += c;
      html += "<tr><th class=\"row\">" + std::to_string(t) + " " + escape_html(name(t)) + "</th>";
      for (size_t p = 0; p < n; ++p) {
        const double share = total ? static_cast<double>(m[t][p]) / static_cast<double>(total) : 0.0;
        const std::array<uint8_t, 3> rgb = heat_colour(share);
        char style[96];
        std::snprintf(style, sizeof style, "background:rgb(%d,%d,%d);color:%s", rgb[0], rgb[1], rgb[2], share > 0.55 ? "#000" : "#fff");
        html += "<td style=\"" + std::string(style) + "\">" + std::to_string(m[t][p]) + "</td>";
      }
      html += "</tr>";
    }
    html += "</table>";
  } else {
    html += picture(run, "confusion", "confusion matrix");
  }
  html += "<h3>Per class</h3><table class=\"per-class\" id=\"per-class-table\"><tr><th>class</th><th>precision</th><th>recall</th>"
          "<th>F1</th><th>images</th></tr>";
  for (size_t k = 0; k < n; ++k) {
    int64_t row = 0, column = 0;
    for (size_t j = 0; j < n; ++j) {
      row += m[k][j];
      column += m[j][k];
    }
    const double hits = static_cast<double>(m[k][k]);
    const double precision = column ? hits / static_cast<double>(column) : std::nan("");
    const double recall = row ? hits / static_cast<double>(row) : std::nan("");
    const double f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : std::nan("");
    html += "<tr><td>" + std::to_string(k) + " " + escape_html(name(k)) + "</td><td>" + fixed(100 * precision, 1) + "%</td><td>" +
            fixed(100 * recall, 1) + "%</td><td>" + fixed(100 * f1, 1) + "%</td><td>" + std::to_string(row) + "</td></tr>";
  }
  return html + "</table>";
}

std::string comparison(const std::vector<RunRecord>& runs) {
  Chart top1{"Validation top-1 of each run", "step", "percent", {}};
  Chart val_loss{"Validation loss of each run", "step", "cross-entropy", {}};
  Chart train_loss{"Training loss of each run (epoch mean)", "step", "cross-entropy", {}};
  Chart lr{"Learning rate of each run", "step", "lr", {}, true};
  std::string table = "<table class=\"summary\"><tr><th>run</th><th>epochs</th><th>best val top-1</th><th>last val top-1</th></tr>";
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunRecord& run = runs[r];
    top1.series.push_back(series_of(run.epochs, "val_top1", run.name, palette(r)));
    val_loss.series.push_back(series_of(run.epochs, "val_loss", run.name, palette(r)));
    train_loss.series.push_back(series_of(run.epochs, "train_loss", run.name, palette(r)));
    lr.series.push_back(series_of(run.steps, "lr", run.name, palette(r)));
    double best = std::nan(""), last = std::nan("");
    for (const MetricsLine& e : run.epochs)
      if (std::isfinite(e.get("val_top1"))) {
        last = e.get("val_top1");
        best = std::isfinite(best) ? std::max(best, last) : last;
      }
    table += "<tr><td style=\"color:" + std::string(palette(r)) + "\">" + escape_html(run.name) + "</td><td>" +
             std::to_string(run.epochs.size()) + "</td><td>" + fixed(best, 2) + "%</td><td>" + fixed(last, 2) + "%</td></tr>";
  }
  return "<section id=\"compare\"><h2>Runs compared</h2>" + table + "</table><div class=\"charts\">" + svg_chart(top1) +
         svg_chart(val_loss) + svg_chart(train_loss) + svg_chart(lr) + "</div></section>";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}h1{font-size:22px}h2{font-size:18px;margin-top:28px;"
    "border-bottom:1px solid #ddd}table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border:1px solid #ddd;"
    "text-align:right;font-size:13px}th.row,table.per-class td:first-child{text-align:left}.summary th{text-align:left}"
    ".confusion td{min-width:28px}.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #eee}"
    ".chart text{font-size:11px;fill:#444}.chart .title{font-size:13px;font-weight:bold}.chart .frame{fill:none;stroke:#999}"
    ".chart .grid{stroke:#eee}.note{color:#888}.picture{image-rendering:pixelated;max-width:100%}"
    "pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto;max-height:400px}";

}  // namespace

double MetricsLine::get(const std::string& name) const {
  const auto it = numbers.find(name);
  return it == numbers.end() ? std::nan("") : it->second;
}

RunRecord read_run(const std::filesystem::path& dir) {
  std::error_code ec;
  CNN_CHECK(std::filesystem::is_directory(dir, ec), "'", dir.string(), "' is not a run folder (no such folder)");
  CNN_CHECK(std::filesystem::exists(dir / "config.ini", ec) || std::filesystem::exists(dir / "metrics.jsonl", ec), "'",
            dir.string(), "' is not a run folder: it holds neither config.ini nor metrics.jsonl (cnn_train writes both ",
            "into <run.dir>/<time>_<name>/); give the folder of a run");
  RunRecord run;
  run.dir = dir;
  run.name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = std::filesystem::absolute(dir).lexically_normal().parent_path().filename().string();
  run.config = read_text(dir / "config.ini");
  std::istringstream classes(read_text(dir / "classes.txt"));
  for (std::string line; std::getline(classes, line);) run.classes.push_back(line);
  std::istringstream metrics(read_text(dir / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    // A line cut short (the run killed while writing it) or not JSON is passed over.
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) {
      run.broken_metrics_lines += !line.empty();
      continue;
    }
    MetricsLine m;
    m.step = j.value("step", int64_t{0});
    m.epoch = j.value("epoch", int64_t{0});
    for (const auto& [key, value] : j.items())
      if (value.is_number() && key != "step" && key != "epoch" && key != "wall_time") m.numbers[key] = value.get<double>();
      else if (value.is_null()) m.numbers[key] = std::nan("");
    (j.value("kind", std::string()) == "epoch" ? run.epochs : run.steps).push_back(std::move(m));
  }
  const nlohmann::json confusion = nlohmann::json::parse(read_text(dir / "confusion.json"), nullptr, false);
  if (confusion.is_object() && confusion.contains("confusion_matrix_rows_truth_columns_predicted")) {
    try {
      run.confusion = confusion["confusion_matrix_rows_truth_columns_predicted"].get<std::vector<std::vector<int64_t>>>();
      run.confusion_epoch = confusion.value("epoch", int64_t{0});
      for (const auto& row : run.confusion)
        if (row.size() != run.confusion.size()) run.confusion.clear();  // not square: not ours
    } catch (const nlohmann::json::exception&) {
      run.confusion.clear();
    }
  }
  for (const char* name : {"samples", "mistakes", "confusion"}) {
    const std::filesystem::path png = dir / (std::string(name) + ".png");
    if (std::filesystem::is_regular_file(png, ec)) run.pictures[name] = read_text(png);
  }
  return run;
}

std::string report_html(const std::vector<RunRecord>& runs) {
  CNN_CHECK(!runs.empty(), "report_html: no runs");
  const RunRecord& run = runs.front();
  std::string html = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape_html(run.name) +
                     " - cnn report</title><style>" + kStyle + "</style></head><body>";
  html += "<h1 id=\"title\">" + escape_html(runs.size() > 1 ? std::to_string(runs.size()) + " runs" : run.name) + "</h1>";
  if (runs.size() > 1) html += comparison(runs);
  for (const RunRecord& r : runs) {
    const std::string heading = runs.size() > 1 ? "<h2>" + escape_html(r.name) + "</h2>" : "";
    html += "<section class=\"run\">" + heading;
    html += "<section id=\"summary\"><h2>Summary</h2>" + summary_table(r) + "</section>";
    html += "<section id=\"curves\"><h2>Curves</h2>" + run_curves(r) + "</section>";
    html += "<section id=\"confusion\"><h2>Confusion matrix</h2>" + confusion_section(r) + "</section>";
    html += "<section id=\"samples\"><h2>First training batch, as the model sees it</h2>" + picture(r, "samples", "training samples") +
            "</section>";
    html += "<section id=\"mistakes\"><h2>Most confident mistakes</h2>" + picture(r, "mistakes", "mistakes") + "</section>";
    html += "<section id=\"config\"><h2>Config</h2><pre>" + escape_html(r.config) + "</pre></section></section>";
  }
  return html + "<p class=\"note\">Written by cnn from the files of the run folder.</p></body></html>\n";
}

void write_report(const std::filesystem::path& path, const std::vector<RunRecord>& runs) {
  io::write_text_atomically(path, report_html(runs));
}

std::string base64(const std::string& bytes) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace cnn::train
