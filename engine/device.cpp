#include "engine/device.h"

#include <cctype>

#include "engine/error.h"

namespace cnn {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string digits = text.substr(5);
    bool all_digits = digits.size() < 6;
    for (char c : digits) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
    if (all_digits) return cuda(std::stoi(digits));
  }
  throw Error("unknown device '" + text + "': use cpu, cuda or cuda:N (N the device index)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace cnn
