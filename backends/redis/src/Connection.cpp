// SPDX-License-Identifier: Apache-2.0
#include "Connection.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "Errors.h"
#include "PlainTransport.h"
#include "Socket.h"
#include "TlsTransport.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Wakeup.h"
#include "dlock/LockError.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

// OpenSSL writes with write(2), so a server that closed the connection raises SIGPIPE, whose
// default action kills the process (plain sockets send with MSG_NOSIGNAL, but the application's
// other sockets and pipes met the same trouble before, and dlock has always ignored it). As gRPC
// does, ignore it process-wide — but only when the application left the default in place; a
// handler or an explicit setting is respected.
// An atomic flag, not a function-local static: a child forked while a parent thread ran this for
// the first time would wait on the static's guard for ever. (A second first caller may go on
// before the first has set the disposition: only the process's very first TLS write can race.)
void ignoreSigpipeByDefault() {
  static std::atomic<bool> done{false};
  if (done.exchange(true, std::memory_order_acq_rel)) return;
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    (void)::sigaction(SIGPIPE, &ignore, nullptr);
  }
}

std::unique_ptr<Transport> open(const ConnectionOptions& options) {
  const auto deadline = Steady::now() + CallBudget::cap(options.connectTimeout);
  std::unique_ptr<Socket> socket = Socket::connect(options, deadline);
  ignoreSigpipeByDefault();
  if (!options.tls.enabled) return std::make_unique<PlainTransport>(std::move(socket), options.address());
  return TlsTransport::connect(std::move(socket), options, deadline);
}

}  // namespace

Connection::Connection(const ConnectionOptions& options)
    : address_(options.address()),
      transport_(open(options)),
      reader_(redisReaderCreate()),
      readTimeout_(options.commandTimeout) {
  if (!reader_) throw std::bad_alloc();
  handshake(options);
}

// One round trip, pipelined: AUTH and SELECT where configured, then TIME. Its reply is the
// server answering (a pool says "reconnected" only after one; under TLS 1.3 a refused client
// certificate shows at this first read) and the clock the bound scripts are judged by.
void Connection::handshake(const ConnectionOptions& options) {
  const bool auth = !options.password.empty() || !options.user.empty();
  const std::string db = std::to_string(options.db);
  if (auth) {
    Argv argv = {"AUTH"};
    if (!options.user.empty()) argv.push_back(options.user);
    argv.push_back(options.password);
    append(argv);
  }
  if (options.db != 0) append({"SELECT", db});
  if (options.serverClock) {
    append({"TIME"});
  } else {
    append({"PING"});
  }
  // A TLS port resets a plain client at its first bytes: only here may a close say so.
  maybeTlsPort_ = options.unixSocket.empty() && !options.tls.enabled;
  if (auth) {
    const ReplyPtr reply = readReply();
    if (reply->type == REDIS_REPLY_ERROR) {
      // The reply names no secret, but say which user so the operator knows where to look.
      const std::string who = options.user.empty() ? "the default user" : "user '" + options.user + "'";
      throw BackendError("dlock: AUTH as " + who + " on " + address_ + " failed: " + std::string(replyText(*reply)));
    }
  }
  if (options.db != 0) {
    const ReplyPtr reply = readReply();
    if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, "SELECT " + db + " on " + address_);
  }
  if (options.serverClock) {
    sampleServerClock(*readReply());
  } else {
    (void)readReply();  // a Sentinel refusing PING still answered
  }
  maybeTlsPort_ = false;
}

void Connection::sampleServerClock(const redisReply& reply) {
  const auto arrived = Steady::now();
  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, "TIME on " + address_);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 || reply.element[0]->type != REDIS_REPLY_STRING ||
      reply.element[1]->type != REDIS_REPLY_STRING) {
    throw BackendError("dlock: TIME on " + address_ + " did not answer seconds and microseconds");
  }
  const std::int64_t serverUs =
      std::stoll(reply.element[0]->str) * 1000000 + std::stoll(reply.element[1]->str);
  const auto localUs = std::chrono::duration_cast<std::chrono::microseconds>(arrived.time_since_epoch()).count();
  serverAheadUs_ = serverUs - localUs;
  sampledAt_ = arrived;
}

std::string Connection::refuseAfter() const {
  const auto now = Steady::now();
  const auto waitEnds = now + CallBudget::cap(readTimeout_);
  const auto sampleAgeUs = std::chrono::duration_cast<std::chrono::microseconds>(now - sampledAt_).count();
  const std::int64_t allowanceUs = 1000 + sampleAgeUs / 2000;
  const std::int64_t endsUs =
      std::chrono::duration_cast<std::chrono::microseconds>(waitEnds.time_since_epoch()).count() + serverAheadUs_ -
      allowanceUs;
  return std::to_string(endsUs / 1000);
}

bool Connection::appendClockSampleIfStale() {
  if (Steady::now() - sampledAt_ <= kClockSampleAge) return false;
  append({"TIME"});
  return true;
}

void Connection::readClockSample() { sampleServerClock(*readReply()); }

void Connection::sampleClockNow() { sampleServerClock(*command({"TIME"})); }

Connection::~Connection() = default;

template <class Step>
auto Connection::guarded(Step&& step) -> decltype(step()) {
  if (broken_) throw ConnectionError("dlock: the connection to " + address_ + " is broken");
  try {
    return step();
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void Connection::waitFor(short events, Deadline deadline, const char* what) {
  if (!waitReady(transport_->fd(), events, deadline, what, address_)) {
    timedOut_ = true;
    throwTimeoutError(std::string(what) + " " + address_);
  }
}

bool Connection::flushUntil(Deadline deadline) {
  if (output_.empty()) return false;
  while (written_ < output_.size()) {
    const IoProgress step = transport_->write(output_.data() + written_, output_.size() - written_);
    written_ += step.bytes;
    if (step.bytes == 0) waitFor(step.waitFor, deadline, "writing to");
  }
  output_.clear();
  written_ = 0;
  return true;
}

bool Connection::readOnce(Deadline deadline, bool wait, bool justAsked) {
  char buffer[16 * 1024];  // a whole TLS record
  IoProgress step;
  // Inside a cancellable wait (Wakeup.h) the reply is waited for in poll's slices (waitReady), so
  // that a cancel cuts the call off within one; a receive bounded by SO_RCVTIMEO would hold it.
  if (justAsked && !transport_->buffered() && !Wakeup::inScope()) {
    // The reply cannot be there yet: wait for it in the read itself where the transport can.
    step = transport_->readWithin(buffer, sizeof buffer,
                                  std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now()));
    if (step.bytes == 0 && !step.closed) waitFor(POLLIN, deadline, "reading a reply from");
  }
  while (true) {
    if (step.bytes == 0 && !step.closed) step = transport_->read(buffer, sizeof buffer);
    if (step.closed) throwClosedError("reading a reply from " + address_, maybeTlsPort_ && firstByte_ < 0);
    if (step.bytes > 0) {
      if (firstByte_ < 0) firstByte_ = static_cast<unsigned char>(buffer[0]);
      if (redisReaderFeed(reader_.get(), buffer, step.bytes) != REDIS_OK) throw std::bad_alloc();
      return true;
    }
    if (!wait) return false;
    waitFor(step.waitFor, deadline, "reading a reply from");
    step = {};
  }
}

void Connection::append(const Argv& argv) {
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  pointers.reserve(argv.size());
  lengths.reserve(argv.size());
  for (const auto& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), pointers.data(), lengths.data());
  if (length < 0 || formatted == nullptr) throw std::bad_alloc();
  output_.append(formatted, static_cast<std::size_t>(length));
  redisFreeCommand(formatted);
}

ReplyPtr Connection::takeBufferedReply() {
  return guarded([&] {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      throwReaderError(*reader_, "reading a reply from " + address_, firstByte_);
    }
    return ReplyPtr(static_cast<redisReply*>(raw));
  });
}

ReplyPtr Connection::readReply() {
  return guarded([&] {
    const auto deadline = Steady::now() + CallBudget::cap(readTimeout_);
    bool justSent = flushUntil(deadline);
    while (true) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
        throwReaderError(*reader_, "reading a reply from " + address_, firstByte_);
      }
      if (raw != nullptr) return ReplyPtr(static_cast<redisReply*>(raw));
      readOnce(deadline, true, justSent);
      justSent = false;
    }
  });
}

ReplyPtr Connection::command(const Argv& argv) {
  append(argv);
  return readReply();
}

void Connection::flushWrites() {
  guarded([&] { (void)flushUntil(Steady::now() + CallBudget::cap(readTimeout_)); });
}

void Connection::readAvailable() {
  guarded([&] {
    // Everything the socket has, and what TLS decrypted into its own buffer: poll() sees only
    // the socket.
    while (readOnce(Steady::now(), false)) {
    }
  });
}

void Connection::setReadTimeout(std::chrono::milliseconds timeout) { readTimeout_ = timeout; }

}  // namespace dlock::detail
