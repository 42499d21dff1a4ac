// What the op-level tests (gradient checks, CPU-vs-CUDA agreement) and the kernel-level emulated
// CUDA tests share, without the engine: the list of public ops every test table is checked against,
// read from engine/ops.h itself so that a new op fails the coverage tests until it has its cases,
// and the input ranges of the unary ops' domains.
#pragma once
#include <fstream>
#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/elementwise_math.h"

#ifndef CNN_OPS_HEADER
#error "CNN_OPS_HEADER (the path of engine/ops.h) is set by tests/CMakeLists.txt"
#endif

namespace cnn::testing {

// The functions engine/ops.h declares as returning a Tensor (or a pair of them): the public ops.
// Operators (aliases of add, neg, scale, ...), void and non-tensor functions are left out.
inline std::set<std::string> public_ops() {
  std::ifstream in(CNN_OPS_HEADER);
  if (!in) throw std::runtime_error("cannot read " CNN_OPS_HEADER);
  std::set<std::string> ops;
  // A declaration starts a line with its return type, then the name and "(" (plain parsing: GCC 12
  // warns inside std::regex under AddressSanitizer, and the declarations are regular).
  for (std::string line; std::getline(in, line);) {
    for (const std::string type : {"Tensor ", "std::pair<Tensor, Tensor> "}) {
      if (line.rfind(type, 0) != 0) continue;
      const size_t start = type.size(), open = line.find('(', start);
      if (open == std::string::npos) continue;
      const std::string name = line.substr(start, open - start);
      const bool identifier = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                              std::all_of(name.begin(), name.end(), [](char ch) {
                                return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                              });
      if (identifier) ops.insert(name);
    }
  }
  return ops;
}

// The public names of the unary ops of CNN_UNARY_OPS: cnn::relu, cnn::silu, ...
inline std::set<std::string> parameterless_unary_ops() {
#define CNN_UNARY_NAME(op, domain) #op,
  return {CNN_UNARY_OPS(CNN_UNARY_NAME)};
#undef CNN_UNARY_NAME
}

// Every UnaryOp with its name and domain, from CNN_UNARY_OPS and CNN_UNARY_OPS_WITH_ARGUMENTS.
struct UnaryEntry {
  UnaryOp op;
  const char* name;
  UnaryDomain domain;
};
inline const std::vector<UnaryEntry>& unary_entries() {
#define CNN_UNARY_ENTRY(name, domain) {UnaryOp::name, #name, UnaryDomain::domain},
  static const std::vector<UnaryEntry> entries = {CNN_UNARY_OPS(CNN_UNARY_ENTRY)
                                                      CNN_UNARY_OPS_WITH_ARGUMENTS(CNN_UNARY_ENTRY)};
#undef CNN_UNARY_ENTRY
  return entries;
}
inline UnaryDomain unary_domain(UnaryOp op) {
  for (const UnaryEntry& e : unary_entries())
    if (e.op == op) return e.domain;
  throw std::logic_error("unary_domain: an op missing from the lists");
}

// Where the tests draw a unary op's inputs: [low, high], or +-[low, high] for a kink at zero.
inline std::pair<double, double> unary_test_range(UnaryDomain domain) {
  switch (domain) {
    case UnaryDomain::real: return {-3.0, 3.0};
    case UnaryDomain::positive: return {0.2, 3.0};
    case UnaryDomain::kink_at_zero: return {0.1, 3.0};
  }
  return {-1.0, 1.0};
}

}  // namespace cnn::testing
