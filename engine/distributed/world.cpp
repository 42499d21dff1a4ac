// The launcher's environment read into a World (world.h): OpenMPI, then Slurm, then torchrun-style
// variables; the first launcher whose rank or size variable is set wins.
#include "engine/distributed/world.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace cnn::distributed {

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::none: return "none";
    case Launcher::mpirun: return "mpirun";
    case Launcher::slurm: return "slurm";
    case Launcher::torchrun: return "torchrun";
  }
  CNN_FAIL("launcher_name: unknown launcher ", static_cast<int>(launcher));
}

std::string World::str() const {
  return detail::concat("rank ", rank, " of ", world_size, " (local rank ", local_rank, ", ",
                        launcher_name(launcher), ")");
}

namespace {

using Getenv = std::function<const char*(const char*)>;

struct LauncherVars {
  Launcher launcher;
  const char *rank, *size, *local_rank;
};

constexpr LauncherVars kLaunchers[] = {
    {Launcher::mpirun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {Launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {Launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

constexpr int kDefaultMasterPort = 29500;  // torchrun's

// The value, or nullptr when unset or empty: `RANK= ./train` reads as "not set" to most users.
const char* lookup(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int parse_int(const char* name, const char* value, Launcher launcher) {
  int out = 0;
  const char* end = value + std::strlen(value);
  const auto [ptr, ec] = std::from_chars(value, end, out);
  CNN_CHECK(ec == std::errc() && ptr == end, "the environment variable ", name, "='", value,
            "' is not an integer (read as part of a ", launcher_name(launcher), " launch)");
  return out;
}

World read_world(const Getenv& getenv, const LauncherVars& vars) {
  const char* rank = lookup(getenv, vars.rank);
  const char* size = lookup(getenv, vars.size);
  CNN_CHECK(rank != nullptr && size != nullptr, rank ? vars.rank : vars.size, "='", rank ? rank : size,
            "' is set but ", rank ? vars.size : vars.rank, " is not: a ", launcher_name(vars.launcher),
            " launch sets both ", vars.rank, " and ", vars.size);
  World w;
  w.launcher = vars.launcher;
  w.rank = parse_int(vars.rank, rank, vars.launcher);
  w.world_size = parse_int(vars.size, size, vars.launcher);
  const char* local_rank = lookup(getenv, vars.local_rank);
  w.local_rank = local_rank ? parse_int(vars.local_rank, local_rank, vars.launcher) : w.rank;

  CNN_CHECK(w.world_size >= 1, vars.size, "=", w.world_size, ": the world size must be at least 1");
  CNN_CHECK(w.rank >= 0, vars.rank, "=", w.rank, ": a rank cannot be negative");
  CNN_CHECK(w.rank < w.world_size, vars.rank, "=", w.rank, " is not below ", vars.size, "=", w.world_size,
            " (ranks count from 0 to the world size - 1)");
  CNN_CHECK(w.local_rank >= 0, vars.local_rank, "=", w.local_rank, ": a local rank cannot be negative");
  // A local rank of k means k other processes on this machine, so it is below the world size too.
  CNN_CHECK(w.local_rank < w.world_size, vars.local_rank, "=", w.local_rank, " is not below ", vars.size, "=",
            w.world_size);

  if (vars.launcher == Launcher::torchrun) {
    const char* addr = lookup(getenv, "MASTER_ADDR");
    w.master_addr = addr ? addr : "127.0.0.1";
    const char* port = lookup(getenv, "MASTER_PORT");
    CNN_CHECK(port != nullptr || w.world_size == 1, "MASTER_PORT is not set: a torchrun-style launch of ",
              vars.size, "=", w.world_size, " ranks needs the port on which rank 0 (MASTER_ADDR=", w.master_addr,
              ") listens for the others, the same on every rank (torchrun uses ", kDefaultMasterPort, ")");
    w.master_port = port ? parse_int("MASTER_PORT", port, vars.launcher) : kDefaultMasterPort;
    CNN_CHECK(w.master_port >= 1 && w.master_port <= 65535, "MASTER_PORT=", w.master_port,
              " is not a TCP port (1 to 65535)");
  }
  return w;
}

}  // namespace

World detect_world(const Getenv& getenv) {
  for (const LauncherVars& vars : kLaunchers)
    if (lookup(getenv, vars.rank) || lookup(getenv, vars.size)) return read_world(getenv, vars);
  return World{};
}

World detect_world() {
  return detect_world([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace cnn::distributed
