// detect_world() from fake environments (each launcher, their precedence, the defaults, every error),
// and the TCP rendezvous between real processes on the loopback interface: forked children, each
// one rank, so that a rank that hangs or crashes cannot take the test process with it.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/rendezvous.h"
#include "engine/distributed/world.h"
#include "engine/error.h"

using namespace cnn;
using namespace cnn::distributed;

namespace {

using Env = std::map<std::string, std::string>;

World detect(const Env& env) {
  return detect_world([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The message of the cnn::Error that detect() throws ("" when it throws none).
std::string detect_error(const Env& env) {
  try {
    detect(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A port that was free a moment ago: bound to port 0, read back, closed.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

World loopback_world(int rank, int world_size, int port, const std::string& addr = "127.0.0.1") {
  World w;
  w.rank = w.local_rank = rank;
  w.world_size = world_size;
  w.launcher = Launcher::torchrun;
  w.master_addr = addr;
  w.master_port = port;
  return w;
}

std::string test_blob() {
  std::string blob(128, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 37 + 11) & 0xff);  // zeros too
  return blob;
}

// A child process that is rank `rank`: exit 0 when it received exactly test_blob(), else 1 (with the
// reason on standard error, unless the test expects it to fail).
pid_t start_rank(int rank, int world_size, int port, double timeout = 20, bool quiet = false,
                 const std::string& addr = "127.0.0.1") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid != 0) return pid;
  int code = 1;
  try {
    const std::string blob = rendezvous_broadcast(loopback_world(rank, world_size, port, addr),
                                                  rank == 0 ? test_blob() : std::string(), timeout);
    code = blob == test_blob() ? 0 : 1;
    if (code != 0) std::fprintf(stderr, "rank %d: received %zu bytes, not the blob\n", rank, blob.size());
  } catch (const std::exception& e) {
    if (!quiet) std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }
  std::fflush(stderr);
  ::_exit(code);  // not exit(): the child must not run the test binary's atexit handlers
}

// The exit codes of `pids`, waiting at most `limit` for all; one still running then is killed (-1).
std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> codes(pids.size(), -2);
  for (size_t done = 0; done < pids.size();) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (codes[i] != -2 || ::waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      ++done;
    }
    if (done == pids.size()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -2) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          codes[i] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return codes;
}

// Rank 0 in this process; the message of its cnn::Error ("" if none).
std::string rank0_error(int world_size, int port, double timeout) {
  try {
    rendezvous_broadcast(loopback_world(0, world_size, port), test_blob(), timeout);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("detect_world: nothing set is one process, rank 0 of 1") {
  const World w = detect({});
  CHECK(w.rank == 0);
  CHECK(w.world_size == 1);
  CHECK(w.local_rank == 0);
  CHECK(w.launcher == Launcher::none);
  CHECK(w.is_main());
  CHECK_FALSE(w.distributed());
  CHECK(w.str() == "rank 0 of 1 (local rank 0, none)");
}

TEST_CASE("detect_world: OpenMPI's mpirun") {
  const World w = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(w.rank == 3);
  CHECK(w.world_size == 4);
  CHECK(w.local_rank == 1);
  CHECK(w.launcher == Launcher::mpirun);
  CHECK(w.under_mpi());
  CHECK(w.distributed());
  CHECK(w.master_addr.empty());
  CHECK(w.str() == "rank 3 of 4 (local rank 1, mpirun)");
}

TEST_CASE("detect_world: Slurm's srun") {
  const World w = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  CHECK(w.rank == 5);
  CHECK(w.world_size == 8);
  CHECK(w.local_rank == 1);
  CHECK(w.launcher == Launcher::slurm);
  CHECK(w.under_mpi());
  CHECK(w.str() == "rank 5 of 8 (local rank 1, slurm)");
}

TEST_CASE("detect_world: torchrun-style variables") {
  const World w = detect({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "node7"},
                          {"MASTER_PORT", "1234"}});
  CHECK(w.rank == 2);
  CHECK(w.world_size == 4);
  CHECK(w.local_rank == 0);
  CHECK(w.launcher == Launcher::torchrun);
  CHECK_FALSE(w.under_mpi());
  CHECK(w.master_addr == "node7");
  CHECK(w.master_port == 1234);
  CHECK(launcher_name(w.launcher) == std::string("torchrun"));
}

TEST_CASE("detect_world: torchrun-style defaults") {
  SUBCASE("LOCAL_RANK defaults to RANK and MASTER_ADDR to 127.0.0.1") {
    const World w = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}});
    CHECK(w.local_rank == 1);
    CHECK(w.master_addr == "127.0.0.1");
    CHECK(w.master_port == 4000);
  }
  SUBCASE("MASTER_PORT defaults to torchrun's 29500 for a world of one") {
    const World w = detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    CHECK(w.master_port == 29500);
    CHECK(w.master_addr == "127.0.0.1");
    CHECK_FALSE(w.distributed());
  }
  SUBCASE("an empty variable counts as unset") {
    CHECK(detect({{"RANK", ""}, {"WORLD_SIZE", ""}}).launcher == Launcher::none);
  }
}

TEST_CASE("detect_world: OpenMPI before Slurm before torchrun") {
  const Env mpi = {
      {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  const Env slurm = {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", "0"}};
  const Env torch = {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "1"}};
  Env all = torch;
  all.insert(slurm.begin(), slurm.end());
  CHECK(detect(all).launcher == Launcher::slurm);
  CHECK(detect(all).rank == 2);
  all.insert(mpi.begin(), mpi.end());
  CHECK(detect(all).launcher == Launcher::mpirun);
  CHECK(detect(all).rank == 1);
  CHECK(detect(all).world_size == 2);
}

TEST_CASE("detect_world: errors name the variable and its value") {
  SUBCASE("not an integer") {
    const std::string e = detect_error({{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
    CHECK(contains(e, "RANK='one'"));
    CHECK(contains(e, "not an integer"));
    CHECK(contains(detect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4x"}}), "SLURM_NTASKS='4x'"));
    CHECK(contains(detect_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1.5"}}),
                   "OMPI_COMM_WORLD_LOCAL_RANK='1.5'"));
    CHECK(contains(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}), "MASTER_PORT='http'"));
    CHECK(contains(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}, {"MASTER_PORT", "1"}}),
                   "WORLD_SIZE='99999999999'"));
  }
  SUBCASE("rank not below the world size") {
    const std::string e = detect_error({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
    CHECK(contains(e, "OMPI_COMM_WORLD_RANK=4"));
    CHECK(contains(e, "OMPI_COMM_WORLD_SIZE=4"));
    CHECK(contains(detect_error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}), "RANK=-1"));
  }
  SUBCASE("world size below 1") {
    CHECK(contains(detect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}), "SLURM_NTASKS=0"));
    CHECK(contains(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "-2"}}), "WORLD_SIZE=-2"));
  }
  SUBCASE("negative or too large local rank") {
    CHECK(contains(detect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "-1"}}),
                   "SLURM_LOCALID=-1"));
    CHECK(contains(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"MASTER_PORT", "1"}}),
                   "LOCAL_RANK=2"));
  }
  SUBCASE("only one of rank and world size") {
    const std::string e = detect_error({{"WORLD_SIZE", "2"}});
    CHECK(contains(e, "WORLD_SIZE='2'"));
    CHECK(contains(e, "RANK is not"));
  }
  SUBCASE("MASTER_PORT missing or out of range") {
    const std::string e = detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    CHECK(contains(e, "MASTER_PORT is not set"));
    CHECK(contains(e, "29500"));
    CHECK(contains(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}), "MASTER_PORT=70000"));
  }
}

TEST_CASE("rendezvous: a world of one returns the blob at once") {
  World w;  // no MASTER_ADDR needed
  CHECK(rendezvous_broadcast(w, test_blob(), 0.01) == test_blob());
}

TEST_CASE("rendezvous: two processes, rank 0's 128 bytes on both") {
  const int port = free_port();
  SUBCASE("MASTER_ADDR an IPv4 address") {
    const std::vector<pid_t> pids = {start_rank(0, 2, port), start_rank(1, 2, port)};
    CHECK(wait_all(pids) == std::vector<int>{0, 0});
  }
  SUBCASE("MASTER_ADDR a host name") {
    const std::vector<pid_t> pids = {start_rank(0, 2, port, 20, false, "localhost"),
                                     start_rank(1, 2, port, 20, false, "localhost")};
    CHECK(wait_all(pids) == std::vector<int>{0, 0});
  }
}

TEST_CASE("rendezvous: three ranks started in reverse order, rank 0 last") {
  const int port = free_port();
  std::vector<pid_t> pids = {start_rank(2, 3, port), start_rank(1, 3, port)};
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pids.push_back(start_rank(0, 3, port));
  CHECK(wait_all(pids) == std::vector<int>{0, 0, 0});
}

TEST_CASE("rendezvous: a rank whose rank 0 never starts times out naming the address") {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    rendezvous_broadcast(loopback_world(1, 2, port), "", 1.0);
  } catch (const Error& e) {
    message = e.what();
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(message);
  CHECK(contains(message, "127.0.0.1:" + std::to_string(port)));
  CHECK(contains(message, "MASTER_PORT"));
  CHECK(contains(message, "rank 1 of 2"));
  CHECK(took >= 0.8);
  CHECK(took < 5);
}

TEST_CASE("rendezvous: rank 0 alone times out naming the missing ranks") {
  const std::string e = rank0_error(3, free_port(), 0.5);
  INFO(e);
  CHECK(contains(e, "only 0 of the 2 other ranks"));
  CHECK(contains(e, "missing: rank 1, 2"));
}

TEST_CASE("rendezvous: rank 0 refuses a peer that sends garbage") {
  const int port = free_port();
  std::thread junk([port] {
    // Rank 0 (this process) may not listen yet: retry the connection for a while.
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        const std::string request = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
        (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        char sink[64];
        while (::recv(fd, sink, sizeof sink, 0) > 0) {
        }  // until rank 0 hangs up
        ::close(fd);
        return;
      }
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  });
  const std::string e = rank0_error(2, port, 5);
  junk.join();
  INFO(e);
  CHECK(contains(e, "not this rendezvous's hello"));
  CHECK(contains(e, "GET / HT"));
  CHECK(contains(e, "127.0.0.1:" + std::to_string(port)));
  CHECK(contains(e, "MASTER_PORT"));
}

TEST_CASE("rendezvous: rank 0 refuses a duplicate rank and a wrong world size") {
  const int port = free_port();
  SUBCASE("two processes both say rank 1") {
    const std::vector<pid_t> pids = {start_rank(1, 3, port, 5, true), start_rank(1, 3, port, 5, true)};
    const std::string e = rank0_error(3, port, 5);
    INFO(e);
    CHECK(contains(e, "two processes say they are rank 1"));
    CHECK(wait_all(pids) == std::vector<int>{1, 1});  // rank 0's failure reaches them as a closed connection
  }
  SUBCASE("a rank started with another WORLD_SIZE") {
    const std::vector<pid_t> pids = {start_rank(1, 3, port, 5, true)};
    const std::string e = rank0_error(2, port, 5);
    INFO(e);
    CHECK(contains(e, "WORLD_SIZE=3"));
    CHECK(contains(e, "rank 0 has WORLD_SIZE=2"));
    CHECK(wait_all(pids) == std::vector<int>{1});
  }
}
