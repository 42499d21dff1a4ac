// Where this process stands in a data-parallel job, read from the environment its launcher set,
// in this order:
//   1. OpenMPI's mpirun:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   2. Slurm's srun:      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//   3. torchrun-style:    RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
// Nothing set: a single process (rank 0 of 1), as without any launcher.
#pragma once
#include <functional>
#include <string>

namespace cnn::distributed {

enum class Launcher { none, mpirun, slurm, torchrun };
const char* launcher_name(Launcher launcher);

struct World {
  int rank = 0, world_size = 1, local_rank = 0;
  Launcher launcher = Launcher::none;
  // torchrun-style only: where rank 0 listens for the rendezvous.
  std::string master_addr;
  int master_port = 0;
  bool is_main() const { return rank == 0; }
  bool distributed() const { return world_size > 1; }
  bool under_mpi() const { return launcher == Launcher::mpirun || launcher == Launcher::slurm; }
  std::string str() const;  // "rank 1 of 4 (local rank 1, mpirun)"
};

// Reads the launcher's variables (see above). A cnn::Error naming the variable when one is not a
// number, or when rank, local rank and world size contradict each other.
World detect_world();

// Same, from a lookup function instead of the process environment (for tests).
World detect_world(const std::function<const char*(const char*)>& getenv);

}  // namespace cnn::distributed
