// The doctest main of the test programs, with one guard: a run asked for named test cases
// (-tc / --test-case, as CTest runs each discovered case) fails when none matched. CTest's
// discovery cuts a test name at a ';' (a CMake list separator), and the cut name matched nothing,
// so such a test passed without running a single check.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace {
std::atomic<int> cases_started{0};

// Counts the test cases that start; reports nothing.
struct CaseCounter : doctest::IReporter {
  explicit CaseCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases_started; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
}  // namespace

REGISTER_LISTENER("case_counter", 1, CaseCounter);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;  // --list-test-cases, --help, ...
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const char* flag : {"-tc=", "--test-case="})
      if (arg.rfind(flag, 0) == 0) filter = arg.substr(std::string(flag).size());
  }
  if (!filter.empty() && cases_started == 0) {
    std::fprintf(stderr,
                 "no test case matches '%s': nothing ran. A name cut at a ';' by CTest's discovery does this; "
                 "keep ';' out of TEST_CASE names\n",
                 filter.c_str());
    return 1;
  }
  return result;
}
