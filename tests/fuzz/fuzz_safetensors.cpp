// Feeds the input as a safetensors file to cnn::io::load_safetensors (engine/io/safetensors.h): the
// JSON header, dtypes, shapes, data offsets and cnn's checksum metadata. A refusal (cnn::Error) is
// success; every tensor of an accepted file must be a CPU tensor with storage for all of its
// elements. Anything else is a finding (an uncaught JSON exception among them).
#include "engine/io/safetensors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cnn::fuzz::InputFile::write("input.safetensors", data, size);
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::io::SafetensorsFile file = cnn::io::load_safetensors(path);
    for (const auto& [name, tensor] : file.tensors) cnn::fuzz::read_every_byte(tensor);
  });
  return 0;
}
