#include "dlock/single/SingleOperator.h"

#include <algorithm>
#include <string>

#include "ConnectionPool.h"
#include "KeyNames.h"
#include "LockCommands.h"
#include "Subscriber.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock {

class SingleOperator::Impl {
 public:
  explicit Impl(const SingleOptions& options)
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

SingleOperator::SingleOperator(SingleOptions options) : impl_(std::make_unique<Impl>(options)) {}

SingleOperator::~SingleOperator() = default;

AcquireResult SingleOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  return impl_->on("lock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::acquireOn(c, names, token, ttl, source);
  });
}

ReleaseResult SingleOperator::unlock(std::string_view key, std::string_view token) {
  detail::ReleaseTries tries;  // the pool retries once after a pooled connection failed
  return impl_->on("unlock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::releaseOn(c, names, token, &impl_->subscriber_, source, &tries);
  });
}

bool SingleOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  return impl_->on("extend", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::extendOn(c, names, token, ttl, source);
  });
}

std::vector<ExtendResult> SingleOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (leases.empty()) return {};
  const std::string what = "(" + std::to_string(leases.size()) + " leases)";  // outlives `source`, which refers to it
  const detail::ReplySource source("extend", what, impl_->pool_.address());
  return impl_->pool_.run([&](detail::Connection& connection) {
    return detail::extendManyOn(connection, impl_->prefix_, leases, ttl, source);
  });
}

std::uint64_t SingleOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  return impl_->on("raiseFence", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::raiseFenceOn(c, names, atLeast, source);
  });
}

std::unique_ptr<IReleaseWatch> SingleOperator::watch(std::string_view key) {
  return impl_->subscriber_.watch(detail::keyNames(impl_->prefix_, key).channel());
}

LeaseInfo SingleOperator::inspect(std::string_view key) {
  return impl_->on("inspect", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::inspectOn(c, names, source);
  });
}

std::string SingleOperator::describe() const { return "redis://" + impl_->pool_.address(); }

std::uint64_t SingleOperator::reconnects() const noexcept {
  return impl_->pool_.reconnects() + impl_->subscriber_.reconnects();
}

}  // namespace dlock
