// schema_extremes: sets each key of the config schema, one at a time, to its extreme values (its
// bounds and just past them, 0, -1, NaN, infinities, 1e308, 2^63, empty, unknown and very long
// words) on a tiny training run of cnn_train, and requires of every case a clean refusal (exit 1
// with an error message) or a clean run (exit 0): no signal, no other exit status, no sanitizer
// report, no std::bad_alloc or other message that does not say what went wrong, no hang.
//
//   schema_extremes CNN_TRAIN [--sample N] [--seed S] [--jobs J] [--timeout SECONDS] [--only KEY]
//
// Without --sample every case runs (scripts/fuzz.sh); with it, N cases drawn with the seed (the
// test suite's sample, printed so that a failure can be replayed with --seed). Exits 1 when any
// case misbehaved, listing each with its key, value and the end of its output. The runs work in a
// scratch folder that is removed at the end.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "train/config/schema.h"
#include "train/small_run.h"

using namespace cnn::train;

namespace {

struct Case {
  std::string key, value;
};

std::string number_text(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// The numbers worth trying for a numeric range: its bounds and just past them, then the values that
// break conversions (0, -1, NaN, infinities, 1e308, 2^63 and below -2^63, the smallest normal).
std::vector<std::string> numeric_extremes(const Range& range, bool integer) {
  std::vector<std::string> values;
  const double step_of = integer ? 1.0 : 0.0;
  auto past = [&](double bound, double direction) {
    const double step = integer ? step_of : std::max(1e-9, std::fabs(bound) * 1e-9);
    return bound + direction * step;
  };
  if (range.min > -Range::kUnbounded) {
    values.push_back(number_text(range.min));
    values.push_back(number_text(past(range.min, -1)));
  }
  if (range.max < Range::kUnbounded) {
    values.push_back(number_text(range.max));
    values.push_back(number_text(past(range.max, +1)));
  }
  for (const char* v : {"0", "-1", "nan", "inf", "-inf", "1e308", "-1e308", "9223372036854775808", "-9223372036854775809",
                        "2.2250738585072014e-308"})
    values.push_back(v);
  return values;
}

std::vector<std::string> extremes_of(const KeySpec& spec) {
  const std::string long_word(5000, 'a');
  switch (spec.type) {
    case KeyType::boolean:
      return {"true", "false", "2", "", "yes please"};
    case KeyType::integer:
      return numeric_extremes(spec.range, true);
    case KeyType::real:
      return numeric_extremes(spec.range, false);
    case KeyType::choice: {
      std::vector<std::string> values = spec.choices;
      for (const std::string& v : {std::string(""), std::string("nosuch"), long_word}) values.push_back(v);
      return values;
    }
    case KeyType::device:
      return {"cpu", "cuda", "cuda:99", "cuda:-1", "cuda:99999999999999999999", "tpu", ""};
    case KeyType::text:
      // Relative paths only: the runs work in a scratch folder two levels down (run_case), so that
      // "../../escaped" stays inside it; "/" would write a run into the root folder.
      return {"", long_word, "../../escaped", ".", "\t", "caf\xe9"};
    case KeyType::integer_list:
    case KeyType::real_list: {
      std::vector<std::string> values = {"", "nan", "1e308,1e308", "-1", "0", ",,,"};
      std::string many;
      for (int i = 0; i < 1000; ++i) many.append(i ? "," : "").append(std::to_string(i + 1));
      values.push_back(many);
      for (const std::string& v : numeric_extremes(spec.range, spec.type == KeyType::integer_list)) {
        std::string pair = v;  // "v,v" (appended: GCC 12 warns of a false overlap in v + "," + v)
        pair.append(",").append(v);
        values.push_back(pair);
      }
      return values;
    }
    case KeyType::text_list:
      return {"", ",,,", long_word, "a,a,a", "caf\xe9"};
  }
  return {};
}

// What one run did: how it ended and the end of what it printed.
struct Outcome {
  int exit_code = -1, signal = 0;
  bool timed_out = false;
  std::string output;
};

// Runs `argv` in the folder `cwd`, its output to `output_file`, killed after `timeout_seconds`.
Outcome run_case(const std::vector<std::string>& argv, const std::string& cwd, const std::string& output_file, double timeout_seconds) {
  Outcome outcome;
  const pid_t child = fork();
  if (child == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(126);
    const int fd = open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setpgid(0, 0);  // its own process group, so that a timeout ends its threads' children too
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      outcome.timed_out = true;
      kill(-child, SIGKILL);
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  std::ifstream in(output_file, std::ios::binary);
  outcome.output.assign(std::istreambuf_iterator<char>(in), {});
  return outcome;
}

// "" when the outcome is a clean run or a clean refusal; otherwise what was wrong.
std::string verdict(const Outcome& o) {
  if (o.timed_out) return "did not finish in time (a hang?)";
  if (o.signal) return "ended by signal " + std::to_string(o.signal) + " (" + strsignal(o.signal) + ")";
  for (const char* bad : {"runtime error:", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "std::bad_alloc",
                          "terminate called", "basic_string", "stoi", "stod", "vector::_M"})
    if (o.output.find(bad) != std::string::npos) return std::string("said \"") + bad + "\"";
  if (o.exit_code == 0) return "";
  if (o.exit_code != 1) return "exit status " + std::to_string(o.exit_code);
  if (o.output.find("cnn_train: ") == std::string::npos) return "exit status 1 without an error message";
  return "";
}

std::string tail_of(const std::string& text, size_t chars) { return text.size() <= chars ? text : "..." + text.substr(text.size() - chars); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: schema_extremes CNN_TRAIN [--sample N] [--seed S] [--jobs J] [--timeout SECONDS] [--only KEY]\n");
    return 2;
  }
  const std::string cnn_train = std::filesystem::absolute(argv[1]).string();  // the runs work elsewhere
  long sample = -1, jobs = 2;
  unsigned long seed = static_cast<unsigned long>(std::chrono::system_clock::now().time_since_epoch().count() % 1000000);
  double timeout = 120;
  std::string only;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--sample") sample = std::stol(value);
    else if (flag == "--seed") seed = std::stoul(value);
    else if (flag == "--jobs") jobs = std::max(1L, std::stol(value));
    else if (flag == "--timeout") timeout = std::stod(value);
    else if (flag == "--only") only = value;
    else {
      std::fprintf(stderr, "schema_extremes: unknown option %s\n", flag.c_str());
      return 2;
    }
  }

  std::vector<Case> cases;
  for (const KeySpec& spec : config_schema())
    if (only.empty() || spec.name() == only)
      for (const std::string& value : extremes_of(spec)) cases.push_back({spec.name(), value});
  const size_t all = cases.size();
  if (sample >= 0 && static_cast<size_t>(sample) < cases.size()) {
    std::mt19937_64 random(seed);
    std::shuffle(cases.begin(), cases.end(), random);
    cases.resize(static_cast<size_t>(sample));
    std::printf("schema_extremes: %zu of %zu cases, seed %lu (replay: --seed %lu --sample %ld)\n", cases.size(), all, seed, seed,
                sample);
  } else {
    std::printf("schema_extremes: all %zu cases\n", all);
  }
  std::fflush(stdout);

  // The tiny run: 64 training and 32 validation images of 4 classes, 2 steps of 16.
  testing::ScratchDir dir("schema_extremes");
  testing::write_idx_split(dir.path, "train", 64, 1);
  testing::write_idx_split(dir.path, "t10k", 32, 2);
  const std::string config = (dir.path / "tiny.ini").string();
  {
    std::ofstream out(config);
    out << "[model]\nname = compact_cnn\nnum_classes = 4\nin_channels = 1\n"
        << "[data]\nformat = idx\npath = " << dir.path.string() << "\nval_path = " << dir.path.string()
        << "\nbatch_size = 16\nimage_size = 28\ncrop_pct = 1.0\nmean = 0.2\nstd = 0.3\nworkers = 1\n"
        << "[train]\nepochs = 1\nmax_steps = 2\ndevice = cpu\nthreads = 1\n"
        << "[log]\nlevel = quiet\n"
        << "[run]\ndir = " << (dir.path / "runs").string() << "\n";
  }

  // The tiny run itself must train, or every case would be a refusal of something else.
  const std::filesystem::path cwd = dir.path / "work" / "a" / "b";
  std::filesystem::create_directories(cwd);
  const Outcome base = run_case({cnn_train, config}, cwd.string(), (dir.path / "base_output").string(), timeout);
  if (base.exit_code != 0 || base.signal || base.timed_out) {
    std::printf("schema_extremes: the tiny run without any override failed (exit %d, signal %d):\n%s\n", base.exit_code, base.signal,
                tail_of(base.output, 2000).c_str());
    return 1;
  }

  std::vector<std::string> failures(cases.size());
  std::atomic<size_t> trained{0};
  std::vector<std::thread> workers;
  std::atomic<size_t> next{0};
  for (long w = 0; w < jobs; ++w)
    workers.emplace_back([&, w] {
      for (size_t i = next++; i < cases.size(); i = next++) {
        const Case& c = cases[i];
        const std::vector<std::string> command = {cnn_train, config, "--set", c.key + "=" + c.value};
        const Outcome outcome = run_case(command, cwd.string(), (dir.path / ("out" + std::to_string(w))).string(), timeout);
        const std::string wrong = verdict(outcome);
        if (wrong.empty() && outcome.exit_code == 0) ++trained;
        if (!wrong.empty())
          failures[i] = "FAILED " + c.key + " = " + (c.value.size() > 60 ? c.value.substr(0, 60) + "..." : c.value) + ": " + wrong +
                        "\n  output: " + tail_of(outcome.output, 600) + "\n";
      }
    });
  for (std::thread& t : workers) t.join();
  size_t failed = 0;
  for (const std::string& f : failures)
    if (!f.empty()) {
      ++failed;
      std::printf("%s", f.c_str());
    }
  std::printf("schema_extremes: %zu case(s): %zu trained, %zu refused cleanly, %zu failed\n", cases.size(), trained.load(),
              cases.size() - trained.load() - failed, failed);
  return failed ? 1 : 0;
}
