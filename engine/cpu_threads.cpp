#include "engine/cpu_threads.h"

#include "engine/config.h"
#if CNN_WITH_OPENMP
#include <omp.h>
#endif

namespace cnn {

void set_cpu_threads(int count) {
#if CNN_WITH_OPENMP
  if (count > 0) omp_set_num_threads(count);
#else
  (void)count;
#endif
}

int cpu_threads() {
#if CNN_WITH_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace cnn
