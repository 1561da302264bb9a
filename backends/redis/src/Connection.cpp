#include "Connection.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>

#include "Errors.h"
#include "dlock/LockError.h"

namespace dlock::detail {
namespace {

// hiredis writes with write(2), so a server that closed the connection raises SIGPIPE, whose
// default action kills the process. As gRPC does, ignore it process-wide — but only when the
// application left the default in place; a handler or an explicit setting is respected.
void ignoreSigpipeByDefault() {
  static const bool done = [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
        (current.sa_flags & SA_SIGINFO) == 0) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      ::sigemptyset(&ignore.sa_mask);
      (void)::sigaction(SIGPIPE, &ignore, nullptr);
    }
    return true;
  }();
  (void)done;
}

timeval toTimeval(std::chrono::milliseconds duration) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(duration.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((duration.count() % 1000) * 1000);
  return tv;
}

}  // namespace

Connection::Connection(const ConnectionOptions& options)
    : address_(options.address()) {
  context_.reset(redisConnectWithTimeout(options.host.c_str(), options.port, toTimeval(options.connectTimeout)));
  if (!context_) throw std::bad_alloc();
  if (context_->err != 0) throwContextError(*context_, "connect to " + address_);
  // A child the application forks and execs must not inherit our Redis connections.
  const int flags = ::fcntl(context_->fd, F_GETFD);
  if (flags >= 0) (void)::fcntl(context_->fd, F_SETFD, flags | FD_CLOEXEC);
  forkSocket_.track(*context_);  // nor one that forks and goes on
  ignoreSigpipeByDefault();
  if (redisSetTimeout(context_.get(), toTimeval(options.commandTimeout)) != REDIS_OK) {
    throwContextError(*context_, "set the command timeout on " + address_);
  }
  if (options.keepAlive && redisEnableKeepAlive(context_.get()) != REDIS_OK) {
    throwContextError(*context_, "enable keep-alive on " + address_);
  }
  if (!options.password.empty() || !options.user.empty()) {
    Argv auth = {"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    ReplyPtr reply = command(auth);
    if (reply->type == REDIS_REPLY_ERROR) {
      // The reply names no secret, but say which user so the operator knows where to look.
      const std::string who = options.user.empty() ? "the default user" : "user '" + options.user + "'";
      throw BackendError("dlock: AUTH as " + who + " on " + address_ + " failed: " + std::string(replyText(*reply)));
    }
  }
  if (options.db != 0) {
    const std::string db = std::to_string(options.db);
    ReplyPtr reply = command({"SELECT", db});
    if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, "SELECT " + db + " on " + address_);
  }
}

Connection::~Connection() = default;

void Connection::fail(const std::string& what) {
  broken_ = true;
  const int error = errno;
  timedOut_ = context_->err == REDIS_ERR_IO &&
              (error == EAGAIN || error == EWOULDBLOCK || std::string_view(context_->errstr).find("temporarily") !=
                                                             std::string_view::npos);
  throwContextError(*context_, what + " on " + address_);
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
  if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), pointers.data(), lengths.data()) !=
      REDIS_OK) {
    fail(std::string(argv.empty() ? "command" : argv.front()));
  }
}

ReplyPtr Connection::readReply() {
  if (broken_) throw ConnectionError("dlock: the connection to " + address_ + " is broken");
  void* raw = nullptr;
  if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) fail("reading a reply");
  return ReplyPtr(static_cast<redisReply*>(raw));
}

ReplyPtr Connection::command(const Argv& argv) {
  append(argv);
  return readReply();
}

void Connection::flushWrites() {
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) fail("writing");
  }
}

void Connection::readAvailable() {
  if (redisBufferRead(context_.get()) != REDIS_OK) fail("reading");
}

ReplyPtr Connection::takeBufferedReply() {
  void* raw = nullptr;
  if (redisReaderGetReply(context_->reader, &raw) != REDIS_OK) {
    broken_ = true;
    throw ConnectionError("dlock: protocol error reading from " + address_);
  }
  return ReplyPtr(static_cast<redisReply*>(raw));
}

void Connection::setReadTimeout(std::chrono::milliseconds timeout) {
  if (redisSetTimeout(context_.get(), toTimeval(timeout)) != REDIS_OK) fail("setting the read timeout");
}

}  // namespace dlock::detail
