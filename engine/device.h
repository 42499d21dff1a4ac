// Where a tensor lives: the CPU, or CUDA device N.
#pragma once
#include <string>

namespace cnn {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  // "cpu", "cuda" or "cuda:N"; anything else is a cnn::Error naming the accepted forms.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

}  // namespace cnn
