// The TCP rendezvous of a torchrun-style launch (rendezvous.h), over POSIX sockets. The protocol,
// every integer big-endian:
//   peer -> rank 0:  hello = magic "cnn-rdzv", u32 version, i32 rank, i32 world size
//   rank 0 -> peer:  magic, u64 length, the blob       (once every peer's hello has arrived)
//   peer -> rank 0:  'A' (ack)
//   rank 0 -> peer:  'G' (go: every rank has the blob; this is the barrier)
// One deadline bounds the whole exchange: every connect, accept, read and write waits in poll() on
// non-blocking sockets for at most the time left.
#include "engine/distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "engine/error.h"

namespace cnn::distributed {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'c', 'n', 'n', '-', 'r', 'd', 'z', 'v'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloSize = 8 + 4 + 4 + 4, kReplyHeaderSize = 8 + 8;
constexpr uint64_t kMaxBlob = uint64_t{1} << 26;  // refuses a garbage length from a stranger on the port

constexpr const char* kCheckReach =
    "that every rank started, that MASTER_ADDR and MASTER_PORT are the same on every rank and name rank 0's "
    "machine and a free port there, and that no firewall blocks that port";
constexpr const char* kCheckProtocol =
    "that no other program or job uses MASTER_PORT, and that every rank runs the same build";

struct Socket {  // owns (closes) a descriptor
  int fd = -1;
  explicit Socket(int descriptor) : fd(descriptor) {}
  Socket(Socket&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail(const World& w, const std::string& what, const std::string& check) {
  CNN_FAIL("rendezvous (rank ", w.rank, " of ", w.world_size, ", rank 0 at MASTER_ADDR:MASTER_PORT = ",
           w.master_addr, ":", w.master_port, "): ", what, ". Check ", check);
}

// True once fd is ready for `events` (or has an error or hang-up, which the next call reports).
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<decltype(left)>(left, 0)));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // a poll() error: the read or write that follows reports it
  }
}

// One connection, and what a failure on it says.
struct Link {
  const World& w;
  Socket socket;
  std::string peer;  // "rank 0", "the connection from 10.0.0.2:41234"
  Clock::time_point deadline;
  double timeout;

  // Exactly n bytes, by the deadline, else a cnn::Error "<what>: <why>. Check <check>".
  void transfer(bool sending, void* buf, size_t n, const std::string& what, const std::string& check) const {
    for (size_t done = 0; done < n;) {
      char* p = static_cast<char*>(buf) + done;
      // MSG_NOSIGNAL: a peer that went away is an error to report, not a SIGPIPE that kills the process.
      const ssize_t r = sending ? ::send(socket.fd, p, n - done, MSG_NOSIGNAL) : ::recv(socket.fd, p, n - done, 0);
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      std::string why;
      if (r == 0) why = peer + " closed the connection";
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) why = std::string(std::strerror(errno)) + " (" + peer + ")";
      else if (wait_for(socket.fd, sending ? POLLOUT : POLLIN, deadline)) continue;
      else why = detail::concat("no word from ", peer, " within the timeout of ", timeout, " s");
      fail(w, what + ": " + why, check);
    }
  }
  void send(const std::string& bytes, const std::string& what) const {
    transfer(true, const_cast<char*>(bytes.data()), bytes.size(), what, kCheckReach);
  }
  void recv(void* buf, size_t n, const std::string& what, const std::string& check = kCheckReach) const {
    transfer(false, buf, n, what, check);
  }
};

void put_be(std::string& s, uint64_t v, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint64_t get_be(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// MASTER_ADDR (an IPv4 address or a host name) and MASTER_PORT; an empty string on success.
std::string resolve(const World& w, sockaddr_in& out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(w.master_addr.c_str(), std::to_string(w.master_port).c_str(), &hints, &found);
  if (rc != 0) return "cannot resolve MASTER_ADDR '" + w.master_addr + "': " + ::gai_strerror(rc);
  std::memcpy(&out, found->ai_addr, sizeof out);
  ::freeaddrinfo(found);
  return {};
}

std::string address(const sockaddr_in& a) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return detail::concat(text, ":", ntohs(a.sin_port));
}

Socket new_socket(const World& w) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd < 0) fail(w, std::string("socket() failed: ") + std::strerror(errno), "the process's limit on open files");
  return s;
}

std::string serve(const World& w, const std::string& blob, Clock::time_point deadline, double timeout) {
  sockaddr_in addr{};
  if (const std::string error = resolve(w, addr); !error.empty()) fail(w, error, "MASTER_ADDR");
  // Listen on every interface of rank 0's machine, as torchrun does: MASTER_ADDR names the machine
  // for the others, and a host name may resolve locally to a loopback alias only (127.0.1.1).
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  Socket listener = new_socket(w);
  const int one = 1;  // SO_REUSEADDR: the previous run's connections in TIME_WAIT must not block the port
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listener.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    fail(w, "rank 0 cannot listen on " + address(addr) + ": " + std::strerror(err),
         err == EADDRINUSE ? "that no other program or job (or an earlier run of this one) holds MASTER_PORT, "
                             "or pick another MASTER_PORT"
                           : "MASTER_PORT (a port below 1024 needs privileges)");
  }
  if (::listen(listener.fd, SOMAXCONN) != 0)
    fail(w, std::string("listen() failed: ") + std::strerror(errno), "MASTER_PORT");

  std::vector<Link> peers;  // in arrival order
  peers.reserve(static_cast<size_t>(w.world_size));
  std::vector<int> arrived(static_cast<size_t>(w.world_size), -1);  // rank -> index in peers
  while (static_cast<int>(peers.size()) < w.world_size - 1) {
    if (!wait_for(listener.fd, POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < w.world_size; ++r)
        if (arrived[r] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail(w, detail::concat("only ", peers.size(), " of the ", w.world_size - 1, " other ranks connected within ",
                             timeout, " s (missing: rank ", missing, ")"), kCheckReach);
    }
    sockaddr_in from{};
    socklen_t len = sizeof from;
    Socket c(::accept4(listener.fd, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (c.fd < 0) {  // a connection that went away before accept() is no error: wait for the next one
      if (errno == ECONNABORTED || errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail(w, std::string("accept() failed: ") + std::strerror(errno), "the process's limit on open files");
    }
    Link link{w, std::move(c), "the connection from " + address(from), deadline, timeout};
    unsigned char hello[kHelloSize];
    link.recv(hello, sizeof hello, "reading the hello of " + link.peer, kCheckProtocol);
    if (std::memcmp(hello, kMagic, sizeof kMagic) != 0) {
      std::string shown(reinterpret_cast<const char*>(hello), sizeof kMagic);
      for (char& ch : shown) ch = (ch >= 32 && ch < 127) ? ch : '.';
      fail(w, link.peer + " sent something that is not this rendezvous's hello (it began with \"" + shown + "\")",
           kCheckProtocol);
    }
    const auto version = static_cast<uint32_t>(get_be(hello + 8, 4));
    const auto rank = static_cast<int32_t>(get_be(hello + 12, 4));
    const auto size = static_cast<int32_t>(get_be(hello + 16, 4));
    if (version != kVersion)
      fail(w, detail::concat(link.peer, " speaks rendezvous protocol version ", version, ", this build ", kVersion),
           "that every rank runs the same build");
    if (size != w.world_size)
      fail(w, detail::concat(link.peer, " says it is rank ", rank, " of WORLD_SIZE=", size,
                             ", but rank 0 has WORLD_SIZE=", w.world_size),
           "that every rank is started with the same WORLD_SIZE");
    if (rank < 1 || rank >= w.world_size)
      fail(w, detail::concat(link.peer, " says it is rank ", rank, ", not one of 1 to ", w.world_size - 1),
           "the RANK of each process");
    if (arrived[rank] >= 0)
      fail(w, detail::concat("two processes say they are rank ", rank, ": ", peers[arrived[rank]].peer, " and ",
                             link.peer), "that each process has its own RANK (and that no other job uses MASTER_PORT)");
    arrived[rank] = static_cast<int>(peers.size());
    link.peer = detail::concat("rank ", rank, " (", link.peer, ")");
    peers.push_back(std::move(link));
  }

  std::string reply(kMagic, sizeof kMagic);
  put_be(reply, blob.size(), 8);
  reply += blob;
  // Three passes over the peers: the blob, the acks, then the go, sent only once every rank has the blob.
  for (const Link& p : peers) p.send(reply, "sending the blob to " + p.peer);
  for (const Link& p : peers) {
    char ack = 0;
    p.recv(&ack, 1, "waiting for " + p.peer + " to acknowledge the blob", "that rank's own error message");
    if (ack != 'A') fail(w, p.peer + " acknowledged the blob with a wrong byte", kCheckProtocol);
  }
  for (const Link& p : peers) p.send("G", "sending 'go' to " + p.peer);
  return blob;
}

// Rank 0 may start after the others: refused (or unresolvable) connections are retried every 100 ms.
Socket connect_to_rank0(const World& w, Clock::time_point deadline, double timeout) {
  for (;;) {
    sockaddr_in addr{};
    std::string last_error = resolve(w, addr);
    if (last_error.empty()) {
      Socket s = new_socket(w);
      int err = ::connect(s.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
      socklen_t len = sizeof err;
      if (err == EINPROGRESS && !wait_for(s.fd, POLLOUT, deadline)) err = ETIMEDOUT;
      else if (err == EINPROGRESS && ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      // On loopback, a retried connect can land on its own ephemeral port (TCP self-connect): not rank 0.
      sockaddr_in self{};
      len = sizeof self;
      if (err == 0 && ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
          address(self) == address(addr))
        err = ECONNREFUSED;
      if (err == 0) return s;
      last_error = std::strerror(err);
    }
    if (Clock::now() + std::chrono::milliseconds(100) >= deadline)
      fail(w, detail::concat("could not connect to rank 0 within ", timeout, " s (last error: ", last_error, ")"),
           kCheckReach);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string join(const World& w, Clock::time_point deadline, double timeout) {
  const Link rank0{w, connect_to_rank0(w, deadline, timeout), "rank 0", deadline, timeout};
  std::string hello(kMagic, sizeof kMagic);
  put_be(hello, kVersion, 4);
  put_be(hello, static_cast<uint32_t>(w.rank), 4);
  put_be(hello, static_cast<uint32_t>(w.world_size), 4);
  rank0.send(hello, "sending the hello to rank 0");
  // Rank 0 answers once every rank has said hello, and hangs up when it fails: either way the cause
  // may be another rank, or in rank 0's own error message.
  const std::string check = std::string("rank 0's error message, then ") + kCheckReach;
  unsigned char header[kReplyHeaderSize];
  rank0.recv(header, sizeof header, "waiting for the blob (rank 0 sends it once every rank has connected)", check);
  const uint64_t length = get_be(header + 8, 8);
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0 || length > kMaxBlob)
    fail(w, "what answered on MASTER_PORT is not this rendezvous's rank 0", kCheckProtocol);
  std::string blob(length, '\0');
  rank0.recv(blob.data(), blob.size(), "reading the blob");
  rank0.send("A", "acknowledging the blob");
  char go = 0;
  rank0.recv(&go, 1, "waiting for rank 0's go (it sends it once every rank has the blob)", check);
  if (go != 'G') fail(w, "rank 0 sent a wrong byte for 'go'", kCheckProtocol);
  return blob;
}

}  // namespace

std::string rendezvous_broadcast(const World& world, const std::string& blob, double timeout_seconds) {
  if (world.world_size == 1) return blob;
  CNN_CHECK(world.rank >= 0 && world.rank < world.world_size, "rendezvous_broadcast: rank ", world.rank,
            " is not in a world of ", world.world_size);
  CNN_CHECK(!world.master_addr.empty() && world.master_port >= 1 && world.master_port <= 65535,
            "rendezvous_broadcast: needs MASTER_ADDR and MASTER_PORT (a torchrun-style World), got '",
            world.master_addr, "' and ", world.master_port, " for ", world.str());
  CNN_CHECK(timeout_seconds > 0, "rendezvous_broadcast: the timeout must be positive, got ", timeout_seconds);
  // Clamped to a year: a larger timeout would overflow the clock's duration.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::min(timeout_seconds, 3.2e7)));
  return world.rank == 0 ? serve(world, blob, deadline, timeout_seconds) : join(world, deadline, timeout_seconds);
}

}  // namespace cnn::distributed
