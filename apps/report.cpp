// cnn_report: rebuilds report.html from the files of one or more run folders; with several, their
// curves are drawn on the same charts (one colour per run) above each run's own section.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "engine/error.h"
#include "train/pictures/report_html.h"

int main(int argc, char** argv) {
  CLI::App app{"Rebuilds report.html from run folders (curves, confusion matrix, per-class scores, pictures); several runs are compared"};
  std::vector<std::string> runs;
  std::string output;
  app.add_option("runs", runs, "run folders (as cnn_train writes them)")->required();
  app.add_option("-o,--output", output, "where to write the page (default: <first run>/report.html for one run, report.html here for several)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<cnn::train::RunRecord> records;
    for (const std::string& dir : runs) records.push_back(cnn::train::read_run(dir));
    const std::filesystem::path path = !output.empty()    ? std::filesystem::path(output)
                                       : runs.size() == 1 ? std::filesystem::path(runs.front()) / "report.html"
                                                          : std::filesystem::path("report.html");
    cnn::train::write_report(path, records);
    std::cout << "cnn_report: wrote " << path.string() << " (" << records.size() << (records.size() == 1 ? " run" : " runs") << ")\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cnn_report: " << e.what() << "\n";
    return 1;
  }
}
