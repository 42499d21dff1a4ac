// A Python script kept running beside a benchmark and asked for one timed call at a time, so that
// the benchmark can alternate its own calls with the script's (both then see the same machine noise).
// The script speaks JSON lines: the first line it prints says it is ready ({"ready": true, ...}) or
// why it cannot run ({"skipped": "..."}); then each request line written to its stdin gets one JSON
// line back. Its stderr goes to the benchmark's. The interpreter is $CNN_PYTHON, default python3.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cnn::bench {

inline std::string python_interpreter() {
  const char* python = std::getenv("CNN_PYTHON");
  return python && *python ? python : "python3";
}

class PythonServer {
 public:
  // Starts `script` with `arguments`; skipped() says why it is not usable, else hello() is its first line.
  PythonServer(const std::filesystem::path& script, const std::vector<std::string>& arguments) {
    if (!std::filesystem::exists(script)) {
      skipped_ = script.string() + " not found";
      return;
    }
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) {
      skipped_ = "could not create pipes for " + script.string();
      return;
    }
    const std::string interpreter = python_interpreter();
    ::signal(SIGPIPE, SIG_IGN);  // a script that died makes request() fail, not the benchmark vanish
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], STDIN_FILENO);
      ::dup2(from_child[1], STDOUT_FILENO);
      ::close(to_child[1]);
      ::close(from_child[0]);
      std::vector<std::string> words{interpreter, script.string()};
      words.insert(words.end(), arguments.begin(), arguments.end());
      std::vector<char*> argv;
      for (std::string& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::printf("{\"skipped\": \"could not run %s\"}\n", interpreter.c_str());
      std::fflush(stdout);
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (pid_ < 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      skipped_ = "could not start " + interpreter;
      return;
    }
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
    hello_ = read_reply();
    if (hello_.is_object() && hello_.contains("skipped")) skipped_ = hello_["skipped"].get<std::string>();
    else if (!hello_.is_object() || !hello_.value("ready", false))
      skipped_ = interpreter + " " + script.string() + " did not start: " + (hello_.is_null() ? "no output" : hello_.dump());
  }
  PythonServer(const PythonServer&) = delete;
  PythonServer& operator=(const PythonServer&) = delete;
  ~PythonServer() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_) std::fclose(from_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }

  const std::string& skipped() const { return skipped_; }
  const nlohmann::json& hello() const { return hello_; }

  // Sends one request line and returns the reply; a script that has gone away is a runtime_error.
  nlohmann::json request(const std::string& line) {
    if (!skipped_.empty()) throw std::runtime_error("the Python server is not running: " + skipped_);
    std::fputs((line + "\n").c_str(), to_);
    std::fflush(to_);
    nlohmann::json reply = read_reply();
    if (!reply.is_object() || reply.contains("error"))
      throw std::runtime_error("the Python server answered '" + line + "' with " + (reply.is_null() ? "nothing" : reply.dump()));
    return reply;
  }

 private:
  // The next line that is a JSON object (other lines, such as warnings printed to stdout, are skipped).
  nlohmann::json read_reply() {
    std::string line;
    int ch;
    while ((ch = std::fgetc(from_)) != EOF) {
      if (ch != '\n') {
        line += static_cast<char>(ch);
        continue;
      }
      if (!line.empty() && line.front() == '{') return nlohmann::json::parse(line, nullptr, false);
      line.clear();
    }
    return nullptr;
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  nlohmann::json hello_;
  std::string skipped_;
};

}  // namespace cnn::bench
