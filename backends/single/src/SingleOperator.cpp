#include "dlock/single/SingleOperator.h"

#include <algorithm>
#include <string>

#include "ConnectionPool.h"
#include "KeyNames.h"
#include "LockCommands.h"
#include "Subscriber.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"

namespace dlock {
namespace {

// What one process owns: its connections and its release subscriber. A forked child makes its
// own at its first call and never touches the parent's.
class Connected {
 public:
  explicit Connected(const SingleOptions& options)
      : prefix_(options.keyPrefix),
        pool_(options.connection, options.pool),
        subscriber_([connection = options.connection] { return connection; }, options.pool) {}

  // Runs `call(connection, names, source)` for `key` on a pooled connection.
  template <class Call>
  auto on(const char* operation, std::string_view key, Call&& call) {
    const detail::KeyNames names = detail::keyNames(prefix_, key);
    const detail::ReplySource source(operation, key, pool_.address());
    return pool_.run([&](detail::Connection& connection) { return call(connection, names, source); });
  }

  const std::string prefix_;
  detail::ConnectionPool pool_;
  detail::Subscriber subscriber_;
};

}  // namespace

class SingleOperator::Impl {
 public:
  explicit Impl(SingleOptions options)
      : options_(std::move(options)), connected_([this] { return std::make_shared<Connected>(options_); }) {}

  // This process's connections.
  Connected& here() const { return *connected_; }

 private:
  const SingleOptions options_;
  detail::ForkLocal<Connected> connected_;
};

SingleOperator::SingleOperator(SingleOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

SingleOperator::~SingleOperator() = default;

AcquireResult SingleOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  return impl_->here().on("lock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::acquireOn(c, names, token, ttl, source);
  });
}

ReleaseResult SingleOperator::unlock(std::string_view key, std::string_view token) {
  Connected& here = impl_->here();
  detail::ReleaseTries tries;  // the pool retries once after a pooled connection failed
  return here.on("unlock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::releaseOn(c, names, token, &here.subscriber_, source, &tries);
  });
}

bool SingleOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  return impl_->here().on("extend", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::extendOn(c, names, token, ttl, source);
  });
}

std::vector<ExtendResult> SingleOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (leases.empty()) return {};
  Connected& here = impl_->here();
  const std::string what = "(" + std::to_string(leases.size()) + " leases)";  // outlives `source`, which refers to it
  const detail::ReplySource source("extend", what, here.pool_.address());
  return here.pool_.run([&](detail::Connection& connection) {
    return detail::extendManyOn(connection, here.prefix_, leases, ttl, source);
  });
}

std::uint64_t SingleOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  return impl_->here().on("raiseFence", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::raiseFenceOn(c, names, atLeast, source);
  });
}

std::unique_ptr<IReleaseWatch> SingleOperator::watch(std::string_view key) {
  Connected& here = impl_->here();
  return here.subscriber_.watch(detail::keyNames(here.prefix_, key).channel());
}

LeaseInfo SingleOperator::inspect(std::string_view key) {
  return impl_->here().on("inspect", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::inspectOn(c, names, source);
  });
}

std::string SingleOperator::describe() const { return "redis://" + impl_->here().pool_.address(); }

std::uint64_t SingleOperator::reconnects() const noexcept {
  try {
    const Connected& here = impl_->here();
    return here.pool_.reconnects() + here.subscriber_.reconnects();
  } catch (...) {  // a forked child could not set up its own connections yet: none re-opened
    return 0;
  }
}

}  // namespace dlock
