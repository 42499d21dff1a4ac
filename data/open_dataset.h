// Opening a dataset from one string, as configs and command lines name them:
//   DIR                          an ImageFolder tree
//   FILE.csv | FILE.txt | FILE.lst   a list file
//   FILE.h5 | FILE.hdf5          a file packed by cnn_pack
//   packed:FILE                  the same whatever its name; anything else (a folder) is refused
//   mnist:DIR[:train|test]  fashion-mnist:DIR[:train|test]  (IDX files, default train)
//   idx:IMAGES,LABELS            an IDX image/label pair
//   cifar10:DIR[:train|test]  cifar100:DIR[:train|test]     (binary version)
#pragma once
#include <string>

#include "data/dataset.h"

namespace cnn::data {

// `log`: warnings while opening (an ImageFolder's links that are not followed); default standard error.
DatasetPtr open_dataset(const std::string& spec, const LogFn& log = {});

}  // namespace cnn::data
