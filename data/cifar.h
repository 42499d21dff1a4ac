// CIFAR-10 and CIFAR-100 in their binary form: fixed-size records of label byte(s) followed by a
// 32x32 image stored channel-planar (1024 R, 1024 G, 1024 B bytes). CIFAR-100 records carry a
// coarse and a fine label; the fine one (100 classes) is used.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/array_dataset.h"

namespace cnn::data {

enum class CifarVariant { cifar10, cifar100 };

// Reads the given binary files, in order, into one dataset. A file whose size is not a whole
// number of records, or a label out of range, is a cnn::Error naming the file and record.
std::shared_ptr<ArrayDataset> open_cifar_files(const std::vector<std::string>& files, CifarVariant variant,
                                               std::vector<std::string> class_names = {});

// The standard layout of the binary distribution in `dir`: data_batch_1..5.bin / test_batch.bin
// (CIFAR-10) or train.bin / test.bin (CIFAR-100). Class names come from batches.meta.txt or
// fine_label_names.txt when present, else CIFAR-10's well-known names or numbers.
std::shared_ptr<ArrayDataset> open_cifar(const std::string& dir, CifarVariant variant, bool train);

}  // namespace cnn::data
