// Feeds the input as an HDF5 tensor file (checkpoints, weights) to cnn::io::load_hdf5
// (engine/io/hdf5.h): the HDF5 structure, dataset types and shapes, root attributes and cnn's
// checksum table in the user block. load_hdf5 opens a path, so each input is written to a file in
// memory first. A refusal (cnn::Error) is success; every tensor of an accepted file must be a CPU
// tensor with storage for all of its elements. Anything else is a finding. (The HDF5 library itself
// is Debian's, not instrumented: a fault inside it shows as a signal, not as an ASan report.)
#include "engine/io/hdf5.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cnn::fuzz::InputFile::write("input.h5", data, size);
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::io::TensorFile file = cnn::io::load_hdf5(path);
    for (const auto& [name, tensor] : file.tensors) cnn::fuzz::read_every_byte(tensor);
  });
  return 0;
}
