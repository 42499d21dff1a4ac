// Byte counts as people read them, for messages and tables: 3.2e9 -> "3.0 GiB", 5e6 -> "4.8 MiB".
#pragma once
#include <string>

namespace cnn {

std::string format_bytes(double bytes);

}  // namespace cnn
