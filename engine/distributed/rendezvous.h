// The TCP rendezvous of a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): rank
// 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects to it (retrying while rank 0 is
// not up yet), and rank 0 sends them one blob of bytes: the NCCL unique id. It carries nothing else;
// the collectives themselves go over NCCL.
#pragma once
#include <string>

#include "engine/distributed/world.h"

namespace cnn::distributed {

// Rank 0's `blob` (ignored on the other ranks) on every rank of `world`. Returns only once every rank
// has it (a barrier). A cnn::Error naming the address, the rank and what to check (MASTER_ADDR,
// MASTER_PORT, a firewall, a rank that did not start) when a rank does not arrive within
// `timeout_seconds`, or when a peer sends something that is not this protocol.
std::string rendezvous_broadcast(const World& world, const std::string& blob, double timeout_seconds);

}  // namespace cnn::distributed
