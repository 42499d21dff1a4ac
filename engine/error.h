// cnn::Error, CNN_CHECK and CNN_FAIL for engine code and library users: defined once, in
// kernels/common/error.h, so that the kernels and every layer above them throw the same type.
#pragma once
#include "kernels/common/error.h"
