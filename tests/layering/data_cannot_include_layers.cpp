// Layering probe, compiled with the include paths of the layer named first: the allowed header
// must be found, the one from a layer above or beside must not (tests/layering/CMakeLists.txt).
#include "data/dataset.h"
#include "layers/module.h"
