// The communicator backends behind connect() (communicator.h); not for use outside
// engine/distributed. Each factory exists only in a build that has its library (engine/config.h:
// CNN_WITH_MPI, CNN_WITH_NCCL).
#pragma once
#include <string>

#include "engine/config.h"
#include "engine/distributed/communicator.h"

namespace cnn::distributed {

#if CNN_WITH_MPI
// Host tensors over MPI_COMM_WORLD (MPI is initialised on first use, finalised at exit).
CommunicatorPtr make_mpi_communicator(const World& world, double timeout_seconds);
// Rank `root`'s bytes on every rank, over MPI (the NCCL id's way under mpirun/srun).
std::string mpi_broadcast_bytes(const std::string& bytes, int root, double timeout_seconds);
#endif

#if CNN_WITH_NCCL
// ncclGetUniqueId's bytes (call on rank 0 only, share with the others).
std::string nccl_unique_id();
// CUDA tensors of device cuda:`device` over NCCL, joined with the id rank 0 made.
CommunicatorPtr make_nccl_communicator(const World& world, int device, const std::string& unique_id,
                                       double timeout_seconds);
#endif

}  // namespace cnn::distributed
