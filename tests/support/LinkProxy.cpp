// SPDX-License-Identifier: Apache-2.0
#include "LinkProxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

// Per direction, what may wait in the proxy before it stops reading the sender: the sender's
// own buffers then fill and TCP slows it down, as a slow link does. Nothing is dropped.
constexpr std::size_t kMaxQueued = 64u << 20;
constexpr std::size_t kReadSize = 64u << 10;
// How long a lost reply is waited for after its request went out (the older FaultProxy's bound).
constexpr auto kReplyBudget = std::chrono::seconds(10);
// A replica sends REPLCONF within its first few commands (after PING and AUTH); the client bytes
// of a connection are looked at up to this much for it.
constexpr std::size_t kSniffBytes = 4096;

// epoll keys: the listener, the wake-up eventfd, else (connection id << 1) | side.
constexpr std::uint64_t kListenerKey = 0;
constexpr std::uint64_t kWakeKey = 1;
constexpr std::uint64_t kClientSide = 0;
constexpr std::uint64_t kServerSide = 1;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("link proxy: " + what + ": " + std::strerror(errno));
}

// Closes with an RST instead of a FIN: SO_LINGER with a zero timeout.
void resetSocket(int fd) {
  const linger abort{1, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(fd);
}

// Whether what a client sent so far names a replication command as a RESP bulk string.
bool namesReplication(std::string sent) {
  std::transform(sent.begin(), sent.end(), sent.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const char* command : {"$8\r\nREPLCONF\r\n", "$5\r\nPSYNC\r\n", "$4\r\nSYNC\r\n"}) {
    if (sent.find(command) != std::string::npos) return true;
  }
  return false;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Applies same-length rewrites of whole numbers to `bytes` in place, and returns how many bytes at
// its end must wait for the next read: a tail that could still grow into a match (RESP ends every
// message with CRLF, so a complete reply never waits).
std::size_t rewriteNumbers(std::string& bytes, const std::vector<std::pair<std::string, std::string>>& rewrites) {
  std::size_t held = 0;
  for (const auto& [from, to] : rewrites) {
    for (std::size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + 1)) {
      const std::size_t end = at + from.size();
      if (end == bytes.size()) break;  // the next byte decides: held below
      if ((at > 0 && isDigit(bytes[at - 1])) || isDigit(bytes[end])) continue;
      bytes.replace(at, from.size(), to);
    }
    for (std::size_t length = std::min(from.size(), bytes.size()); length > held; --length) {
      if (bytes.compare(bytes.size() - length, length, from, 0, length) == 0) {
        held = length;
        break;
      }
    }
  }
  return held;
}

void noDelay(int fd) {
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// What one read from a side brought, and when; it leaves once `readAt` + the latency passed.
struct Chunk {
  std::string bytes;
  Clock::time_point readAt;
  bool losesReply = false;  // once sent, the connection's next reply is lost (loseNextReply)
};

// One direction of a connection: bytes read from one side, not yet written to the other.
struct Flow {
  std::deque<Chunk> chunks;
  std::size_t offset = 0;   // sent bytes of chunks.front()
  std::size_t queued = 0;   // unsent bytes in chunks
  bool blocked = false;     // the destination would block: wait for EPOLLOUT
  bool sourceEnded = false; // EOF read from the source: close once the flow is drained
};

}  // namespace

class LinkProxy::Impl {
 public:
  Impl(std::string targetHost, int targetPort, int listenPort);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  int port() const { return port_; }
  int targetPort() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return targetPort_;
  }
  void retarget(int targetPort) {
    std::unique_lock<std::mutex> guard(mutex_);
    targetPort_ = targetPort;
    resetOpen(guard);
  }
  void setLink(Mode mode, std::chrono::milliseconds latency, Direction direction);
  void refuse() {
    std::unique_lock<std::mutex> guard(mutex_);
    mode_ = Mode::refuse;
    blackholed_ = {false, false};
    latency_ = {};
    resetOpen(guard);
  }
  Mode mode() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return mode_;
  }
  void setReplication(bool blackhole, std::chrono::milliseconds latency, Direction direction,
                      std::string marker = {});
  void blackholeClientsSending(std::string marker, std::optional<std::size_t> offset) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      cutMarker_ = std::move(marker);
      cutOffset_ = offset;
    }
    wake();
  }
  std::size_t replicationConnections() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return static_cast<std::size_t>(std::count_if(connections_.begin(), connections_.end(),
                                                  [](const auto& entry) { return entry.second.replication; }));
  }
  void rewriteReplies(std::vector<std::pair<std::string, std::string>> rewrites) {
    for (const auto& [from, to] : rewrites) {
      if (from.size() != to.size() || from.empty()) throw std::invalid_argument("link proxy: a rewrite keeps the length");
    }
    std::lock_guard<std::mutex> guard(mutex_);
    rewrites_ = std::move(rewrites);
  }
  void resetAll() {
    std::unique_lock<std::mutex> guard(mutex_);
    resetOpen(guard);
  }
  std::size_t openConnections() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return connections_.size();
  }
  std::uint64_t acceptedConnections() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return accepted_;
  }
  void holdNewConnections() {
    std::lock_guard<std::mutex> guard(mutex_);
    holdNew_ = true;
  }
  bool waitForHeld(std::string_view text, std::chrono::milliseconds budget);
  bool waitForBlackholed(std::string_view text, std::chrono::milliseconds budget);
  void holdClientsSending(std::string marker) {
    std::lock_guard<std::mutex> guard(mutex_);
    holdMarker_ = std::move(marker);
  }
  bool waitUntilNoneHeld(std::chrono::milliseconds budget) {
    std::unique_lock<std::mutex> guard(mutex_);
    return changed_.wait_for(guard, budget, [&] {
      return std::none_of(connections_.begin(), connections_.end(), [](const auto& entry) { return entry.second.held; });
    });
  }
  void release();
  void loseNextReply(std::string marker) {
    std::lock_guard<std::mutex> guard(mutex_);
    loseArmed_ = true;
    loseMarker_ = std::move(marker);
  }
  bool waitReplyLost(std::chrono::milliseconds budget) {
    std::unique_lock<std::mutex> guard(mutex_);
    return changed_.wait_for(guard, budget, [this] { return replyLost_; });
  }

 private:
  struct Connection {
    int client = -1;
    int server = -1;
    bool connecting = true;  // the non-blocking connect to the target is under way
    bool held = false;       // holdNewConnections: client bytes wait for release()
    bool replication = false;  // its client sent REPLCONF, PSYNC or SYNC
    std::string sniffed;     // its client's first bytes, up to kSniffBytes
    std::vector<std::pair<std::string, std::string>> rewrites;  // rewriteReplies, as at its accept
    std::string downHeld;    // the end of a read from the target that may be part of a rewrite
    std::optional<Clock::time_point> losingUntil;  // its next reply is lost; given up after this
    Flow up;                 // client → target
    Flow down;               // target → client
    std::uint32_t clientEvents = 0;  // registered with epoll
    std::uint32_t serverEvents = 0;
    bool closing = false;    // closed this round; erased after the round's events
  };

  void run();
  void wake() const;
  // Asks the I/O thread to reset every open connection and waits until it has.
  void resetOpen(std::unique_lock<std::mutex>& guard);
  void accept();
  void onEvent(std::uint64_t key, std::uint32_t events, Clock::time_point now);
  void readSide(Connection& connection, bool fromClient, Clock::time_point now);
  // Writes what is due of one flow; the earliest time something else falls due, if any.
  std::optional<Clock::time_point> pump(Connection& connection, bool up, Clock::time_point now);
  void close(Connection& connection, bool reset);
  void watch(int fd, std::uint64_t key, std::uint32_t& registered, std::uint32_t wanted);
  std::optional<Clock::time_point> service(Connection& connection, std::uint64_t id, Clock::time_point now);

  const std::string targetHost_;
  int port_ = 0;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  int epollFd_ = -1;

  mutable std::mutex mutex_;  // held by the I/O thread except while it waits in epoll_wait
  std::condition_variable changed_;  // held bytes arrived, a reply was lost, a reset was done
  int targetPort_;                                  // guarded by mutex_
  Mode mode_ = Mode::pass;                          // guarded by mutex_
  std::array<bool, 2> blackholed_{false, false};    // guarded by mutex_; [0] up, [1] down
  std::array<std::chrono::milliseconds, 2> latency_{};  // guarded by mutex_
  std::array<bool, 2> replicationBlackholed_{false, false};  // guarded by mutex_
  std::array<std::chrono::milliseconds, 2> replicationLatency_{};  // guarded by mutex_
  std::string replicationMarker_;  // guarded by mutex_; delayReplicationOf, empty: every replica
  std::string cutMarker_;  // guarded by mutex_; blackholeClientsSending, empty when off
  std::optional<std::size_t> cutOffset_;  // guarded by mutex_
  std::vector<std::pair<std::string, std::string>> rewrites_;  // guarded by mutex_
  bool holdNew_ = false;                            // guarded by mutex_
  std::string holdMarker_;                          // guarded by mutex_; holdClientsSending, empty when off
  bool loseArmed_ = false;                          // guarded by mutex_
  std::string loseMarker_;                          // guarded by mutex_; empty: any request
  bool replyLost_ = false;                          // guarded by mutex_
  std::uint64_t resetsAsked_ = 0;                   // guarded by mutex_
  std::uint64_t resetsDone_ = 0;                    // guarded by mutex_
  bool stopping_ = false;                           // guarded by mutex_
  std::uint64_t accepted_ = 0;                      // guarded by mutex_
  std::uint64_t nextId_ = 1;                        // guarded by mutex_
  std::map<std::uint64_t, Connection> connections_; // guarded by mutex_
  std::vector<char> readBuffer_ = std::vector<char>(kReadSize);  // the I/O thread's
  std::thread thread_;
};

LinkProxy::Impl::Impl(std::string targetHost, int targetPort, int listenPort)
    : targetHost_(std::move(targetHost)), targetPort_(targetPort) {
  sockaddr_in probe{};
  if (::inet_pton(AF_INET, targetHost_.c_str(), &probe.sin_addr) != 1) {
    throw std::invalid_argument("link proxy: target host must be an IPv4 address: " + targetHost_);
  }
  listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) fail("socket");
  // A harness that restarts a proxy on its old port must not wait for TIME_WAIT to end.
  const int on = 1;
  (void)::setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(listenPort));
  socklen_t length = sizeof address;
  if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::listen(listenFd_, 128) != 0) {
    const int error = errno;
    ::close(listenFd_);
    errno = error;
    fail("listen on 127.0.0.1:" + std::to_string(listenPort));
  }
  port_ = ntohs(address.sin_port);
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epollFd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event listening{EPOLLIN, {}};
  listening.data.u64 = kListenerKey;
  epoll_event waking{EPOLLIN, {}};
  waking.data.u64 = kWakeKey;
  if (wakeFd_ < 0 || epollFd_ < 0 || ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, listenFd_, &listening) != 0 ||
      ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &waking) != 0) {
    const int error = errno;
    ::close(listenFd_);
    if (wakeFd_ >= 0) ::close(wakeFd_);
    if (epollFd_ >= 0) ::close(epollFd_);
    errno = error;
    fail("epoll");
  }
  thread_ = std::thread([this] { run(); });
}

LinkProxy::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  for (auto& [id, connection] : connections_) close(connection, false);
  ::close(listenFd_);
  ::close(wakeFd_);
  ::close(epollFd_);
}

void LinkProxy::Impl::setLink(Mode mode, std::chrono::milliseconds latency, Direction direction) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    mode_ = mode;
    const bool up = direction != Direction::fromTarget;
    const bool down = direction != Direction::toTarget;
    blackholed_ = {mode == Mode::blackhole && up, mode == Mode::blackhole && down};
    latency_ = {up ? latency : std::chrono::milliseconds(0), down ? latency : std::chrono::milliseconds(0)};
    if (mode == Mode::pass) {
      replicationBlackholed_ = {false, false};
      replicationLatency_ = {};
      replicationMarker_.clear();
      cutMarker_.clear();
    }
  }
  wake();  // what waited may be due now
}

void LinkProxy::Impl::setReplication(bool blackhole, std::chrono::milliseconds latency, Direction direction,
                                     std::string marker) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    replicationMarker_ = std::move(marker);
    const bool up = direction != Direction::fromTarget;
    const bool down = direction != Direction::toTarget;
    replicationBlackholed_ = {blackhole && up, blackhole && down};
    replicationLatency_ = {up ? latency : std::chrono::milliseconds(0), down ? latency : std::chrono::milliseconds(0)};
  }
  wake();
}

bool LinkProxy::Impl::waitForHeld(std::string_view text, std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [&] {
    for (const auto& [id, connection] : connections_) {
      if (!connection.held) continue;
      // Nothing of a held flow has been sent, so its chunks are everything it sent, in order.
      std::string sent;
      for (const Chunk& chunk : connection.up.chunks) sent += chunk.bytes;
      if (sent.find(text) != std::string::npos) return true;
    }
    return false;
  });
}

bool LinkProxy::Impl::waitForBlackholed(std::string_view text, std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [&] {
    if (!blackholed_[0]) return false;
    for (const auto& [id, connection] : connections_) {
      std::string waiting;
      for (const Chunk& chunk : connection.up.chunks) waiting += chunk.bytes;
      if (waiting.find(text) != std::string::npos) return true;
    }
    return false;
  });
}

void LinkProxy::Impl::release() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    holdNew_ = false;
    holdMarker_.clear();
    for (auto& [id, connection] : connections_) connection.held = false;
  }
  wake();
}

void LinkProxy::Impl::wake() const {
  const std::uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof one);
}

void LinkProxy::Impl::resetOpen(std::unique_lock<std::mutex>& guard) {
  const std::uint64_t ticket = ++resetsAsked_;
  wake();
  changed_.wait(guard, [&] { return resetsDone_ >= ticket; });
}

void LinkProxy::Impl::watch(int fd, std::uint64_t key, std::uint32_t& registered, std::uint32_t wanted) {
  if (wanted == registered) return;
  epoll_event event{wanted, {}};
  event.data.u64 = key;
  (void)::epoll_ctl(epollFd_, EPOLL_CTL_MOD, fd, &event);
  registered = wanted;
}

void LinkProxy::Impl::close(Connection& connection, bool reset) {
  if (connection.closing) return;
  connection.closing = true;
  // Closing removes them from the epoll set: each fd is in no other process or descriptor.
  if (reset) {
    resetSocket(connection.client);
    resetSocket(connection.server);
  } else {
    ::close(connection.client);
    ::close(connection.server);
  }
  connection.client = -1;
  connection.server = -1;
}

void LinkProxy::Impl::accept() {
  while (true) {
    const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: the listener stays readable and is tried again
    }
    if (mode_ == Mode::refuse) {
      resetSocket(client);
      continue;
    }
    ++accepted_;
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<std::uint16_t>(targetPort_));
    (void)::inet_pton(AF_INET, targetHost_.c_str(), &target.sin_addr);
    if (server < 0 ||
        (::connect(server, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0 && errno != EINPROGRESS)) {
      if (server >= 0) ::close(server);
      resetSocket(client);  // the client sees the target refuse, as it would without the proxy
      continue;
    }
    noDelay(client);
    noDelay(server);
    const std::uint64_t id = nextId_++;
    Connection& connection = connections_[id];
    connection.client = client;
    connection.server = server;
    connection.held = holdNew_;
    connection.rewrites = rewrites_;
    connection.clientEvents = EPOLLIN;
    connection.serverEvents = EPOLLOUT;  // writable once connected
    epoll_event clientEvent{connection.clientEvents, {}};
    clientEvent.data.u64 = (id << 1) | kClientSide;
    epoll_event serverEvent{connection.serverEvents, {}};
    serverEvent.data.u64 = (id << 1) | kServerSide;
    if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, client, &clientEvent) != 0 ||
        ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, server, &serverEvent) != 0) {
      close(connection, true);
    }
  }
}

void LinkProxy::Impl::readSide(Connection& connection, bool fromClient, Clock::time_point now) {
  Flow& flow = fromClient ? connection.up : connection.down;
  if (flow.sourceEnded || flow.queued >= kMaxQueued) return;
  const ssize_t got =
      ::recv(fromClient ? connection.client : connection.server, readBuffer_.data(), readBuffer_.size(), 0);
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    close(connection, true);  // a reset from one side resets the other
    return;
  }
  if (got == 0) {
    flow.sourceEnded = true;  // closes the connection once what came before the FIN is through
    if (!fromClient && !connection.downHeld.empty()) {
      flow.queued += connection.downHeld.size();
      flow.chunks.push_back(Chunk{std::move(connection.downHeld), now, false});
      connection.downHeld.clear();
    }
    return;
  }
  if (!fromClient && connection.losingUntil) {
    // The target answered the request: it ran. Its reply goes down with the connection.
    connection.losingUntil.reset();
    replyLost_ = true;
    changed_.notify_all();
    close(connection, false);
    return;
  }
  Chunk chunk{std::string(readBuffer_.data(), static_cast<std::size_t>(got)), now, false};
  if (!fromClient && !connection.rewrites.empty()) {
    chunk.bytes.insert(0, connection.downHeld);
    const std::size_t held = rewriteNumbers(chunk.bytes, connection.rewrites);
    connection.downHeld = chunk.bytes.substr(chunk.bytes.size() - held);
    chunk.bytes.resize(chunk.bytes.size() - held);
    if (chunk.bytes.empty()) return;
  }
  if (fromClient && connection.sniffed.size() < kSniffBytes) {
    connection.sniffed += chunk.bytes.substr(0, kSniffBytes - connection.sniffed.size());
    connection.replication = connection.replication || namesReplication(connection.sniffed);
  }
  if (fromClient && !holdMarker_.empty() && chunk.bytes.find(holdMarker_) != std::string::npos) connection.held = true;
  if (fromClient && loseArmed_ && (loseMarker_.empty() || chunk.bytes.find(loseMarker_) != std::string::npos)) {
    loseArmed_ = false;
    chunk.losesReply = true;
  }
  flow.queued += chunk.bytes.size();
  flow.chunks.push_back(std::move(chunk));
  if (fromClient && (connection.held || blackholed_[0])) changed_.notify_all();
}

std::optional<Clock::time_point> LinkProxy::Impl::pump(Connection& connection, bool up, Clock::time_point now) {
  Flow& flow = up ? connection.up : connection.down;
  const std::size_t direction = up ? 0 : 1;
  const bool replication = connection.replication && (replicationMarker_.empty() ||
                                                      connection.sniffed.find(replicationMarker_) != std::string::npos);
  const bool cut = !cutMarker_.empty() &&
                   (cutOffset_ ? connection.sniffed.size() >= *cutOffset_ + cutMarker_.size() &&
                                     connection.sniffed.compare(*cutOffset_, cutMarker_.size(), cutMarker_) == 0
                               : connection.sniffed.find(cutMarker_) != std::string::npos);
  if (blackholed_[direction] || (replication && replicationBlackholed_[direction]) || cut || (up && connection.held) ||
      connection.connecting || flow.blocked) {
    return std::nullopt;
  }
  const std::chrono::milliseconds latency =
      replication ? std::max(latency_[direction], replicationLatency_[direction]) : latency_[direction];
  const int to = up ? connection.server : connection.client;
  while (!flow.chunks.empty()) {
    Chunk& chunk = flow.chunks.front();
    const Clock::time_point due = chunk.readAt + latency;
    if (due > now) return due;
    const std::size_t left = chunk.bytes.size() - flow.offset;
    const ssize_t sent = ::send(to, chunk.bytes.data() + flow.offset, left, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        flow.blocked = true;
      } else {
        close(connection, true);
      }
      return std::nullopt;
    }
    flow.queued -= static_cast<std::size_t>(sent);
    if (static_cast<std::size_t>(sent) < left) {
      flow.offset += static_cast<std::size_t>(sent);
      flow.blocked = true;  // the socket's buffer is full: the next send would block
      return std::nullopt;
    }
    if (chunk.losesReply) connection.losingUntil = now + kReplyBudget;
    flow.offset = 0;
    flow.chunks.pop_front();
  }
  return std::nullopt;
}

void LinkProxy::Impl::onEvent(std::uint64_t key, std::uint32_t events, Clock::time_point now) {
  const auto found = connections_.find(key >> 1);
  if (found == connections_.end() || found->second.closing) return;
  Connection& connection = found->second;
  const bool client = (key & 1) == kClientSide;
  if (!client && connection.connecting) {
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(connection.server, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error != 0) {
      close(connection, true);  // the target refused: so does the proxy, with an RST
      return;
    }
    if ((events & EPOLLOUT) == 0) return;
    connection.connecting = false;
    return;
  }
  if ((events & EPOLLOUT) != 0) (client ? connection.down : connection.up).blocked = false;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
    const Flow& flow = client ? connection.up : connection.down;
    if ((events & EPOLLIN) == 0 && (flow.sourceEnded || flow.queued >= kMaxQueued)) {
      close(connection, true);  // an error or hang-up on a side we no longer read
      return;
    }
    readSide(connection, client, now);
  }
}

std::optional<Clock::time_point> LinkProxy::Impl::service(Connection& connection, std::uint64_t id,
                                                          Clock::time_point now) {
  if (connection.closing) return std::nullopt;
  if (connection.losingUntil && *connection.losingUntil <= now) {
    connection.losingUntil.reset();  // no answer in time: the connection goes, nothing was lost
    replyLost_ = false;
    changed_.notify_all();
    close(connection, false);
    return std::nullopt;
  }
  std::optional<Clock::time_point> next = pump(connection, true, now);
  if (connection.closing) return std::nullopt;
  const std::optional<Clock::time_point> downNext = pump(connection, false, now);
  if (connection.closing) return std::nullopt;
  if (downNext && (!next || *downNext < *next)) next = downNext;
  // A side that closed closes the whole connection, after what it sent before closing.
  if ((connection.up.sourceEnded && connection.up.chunks.empty()) ||
      (connection.down.sourceEnded && connection.down.chunks.empty())) {
    close(connection, false);
    return std::nullopt;
  }
  if (connection.losingUntil && (!next || *connection.losingUntil < *next)) next = connection.losingUntil;

  const auto wants = [](const Flow& in, const Flow& out) {
    std::uint32_t events = 0;
    if (!in.sourceEnded && in.queued < kMaxQueued) events |= EPOLLIN;
    if (out.blocked) events |= EPOLLOUT;
    return events;
  };
  watch(connection.client, (id << 1) | kClientSide, connection.clientEvents, wants(connection.up, connection.down));
  watch(connection.server, (id << 1) | kServerSide, connection.serverEvents,
        connection.connecting ? std::uint32_t{EPOLLOUT} : wants(connection.down, connection.up));
  return next;
}

void LinkProxy::Impl::run() {
  std::array<epoll_event, 64> events{};
  std::unique_lock<std::mutex> guard(mutex_);
  constexpr Clock::time_point kNothingDue = Clock::time_point::max();
  Clock::time_point next = kNothingDue;  // the earliest delayed chunk or deadline
  while (!stopping_) {
    int timeout = -1;
    if (next != kNothingDue) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
      timeout = static_cast<int>(std::max<std::chrono::milliseconds::rep>(wait.count(), 0));
    }
    guard.unlock();
    const int ready = ::epoll_wait(epollFd_, events.data(), static_cast<int>(events.size()), timeout);
    guard.lock();
    if (stopping_) break;
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < ready; ++i) {
      const std::uint64_t key = events[static_cast<std::size_t>(i)].data.u64;
      if (key == kWakeKey) {
        std::uint64_t count = 0;
        (void)!::read(wakeFd_, &count, sizeof count);
      } else if (key == kListenerKey) {
        accept();
      } else {
        onEvent(key, events[static_cast<std::size_t>(i)].events, now);
      }
    }
    if (resetsDone_ < resetsAsked_) {
      for (auto& [id, connection] : connections_) close(connection, true);
      resetsDone_ = resetsAsked_;
      changed_.notify_all();
    }
    next = kNothingDue;
    for (auto it = connections_.begin(); it != connections_.end();) {
      const std::optional<Clock::time_point> due = service(it->second, it->first, now);
      if (due && *due < next) next = *due;
      if (it->second.closing && it->second.held) changed_.notify_all();  // waitUntilNoneHeld
      it = it->second.closing ? connections_.erase(it) : std::next(it);
    }
  }
}

LinkProxy::LinkProxy(std::string targetHost, int targetPort, int listenPort)
    : impl_(std::make_unique<Impl>(std::move(targetHost), targetPort, listenPort)) {}

LinkProxy::~LinkProxy() = default;

int LinkProxy::port() const { return impl_->port(); }
std::string LinkProxy::address() const { return "127.0.0.1:" + std::to_string(port()); }
std::string LinkProxy::uri() const { return "redis://" + address(); }
int LinkProxy::targetPort() const { return impl_->targetPort(); }
void LinkProxy::retarget(int targetPort) { impl_->retarget(targetPort); }

void LinkProxy::pass() { impl_->setLink(Mode::pass, std::chrono::milliseconds(0), Direction::both); }
void LinkProxy::delay(std::chrono::milliseconds latency, Direction direction) {
  impl_->setLink(Mode::delay, latency, direction);
}
void LinkProxy::blackhole(Direction direction) {
  impl_->setLink(Mode::blackhole, std::chrono::milliseconds(0), direction);
}
void LinkProxy::refuse() { impl_->refuse(); }
LinkProxy::Mode LinkProxy::mode() const { return impl_->mode(); }
void LinkProxy::delayReplication(std::chrono::milliseconds latency, Direction direction) {
  impl_->setReplication(false, latency, direction);
}
void LinkProxy::blackholeReplication(Direction direction) {
  impl_->setReplication(true, std::chrono::milliseconds(0), direction);
}
void LinkProxy::delayReplicationOf(std::string marker, std::chrono::milliseconds latency) {
  impl_->setReplication(false, latency, Direction::both, std::move(marker));
}
void LinkProxy::passReplication() { impl_->setReplication(false, std::chrono::milliseconds(0), Direction::both); }
void LinkProxy::blackholeClientsSending(std::string marker, std::optional<std::size_t> offset) {
  impl_->blackholeClientsSending(std::move(marker), offset);
}
std::size_t LinkProxy::replicationConnections() const { return impl_->replicationConnections(); }

void LinkProxy::rewriteReplies(std::vector<std::pair<std::string, std::string>> rewrites) {
  impl_->rewriteReplies(std::move(rewrites));
}
void LinkProxy::resetAll() { impl_->resetAll(); }
std::size_t LinkProxy::openConnections() const { return impl_->openConnections(); }
std::uint64_t LinkProxy::acceptedConnections() const { return impl_->acceptedConnections(); }

void LinkProxy::holdNewConnections() { impl_->holdNewConnections(); }
void LinkProxy::holdClientsSending(std::string marker) { impl_->holdClientsSending(std::move(marker)); }
bool LinkProxy::waitUntilNoneHeld(std::chrono::milliseconds budget) { return impl_->waitUntilNoneHeld(budget); }
bool LinkProxy::waitForHeld(std::string_view text, std::chrono::milliseconds budget) {
  return impl_->waitForHeld(text, budget);
}

bool LinkProxy::waitForBlackholed(std::string_view text, std::chrono::milliseconds budget) {
  return impl_->waitForBlackholed(text, budget);
}
void LinkProxy::release() { impl_->release(); }

void LinkProxy::loseNextReply(std::string marker) { impl_->loseNextReply(std::move(marker)); }
bool LinkProxy::waitReplyLost(std::chrono::milliseconds budget) { return impl_->waitReplyLost(budget); }

}  // namespace dlock::test
