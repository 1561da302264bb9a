#include "dlock/single/SingleOperator.h"

#include <algorithm>
#include <string>

#include "ConnectionPool.h"
#include "KeyNames.h"
#include "Replies.h"
#include "Scripts.h"
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

  std::string where(const char* operation, std::string_view key) const {
    return std::string(operation) + " " + detail::quoteKey(key) + " on " + pool_.address();
  }

  const std::string prefix_;
  detail::ConnectionPool pool_;
  detail::Subscriber subscriber_;
};

SingleOperator::SingleOperator(SingleOptions options) : impl_(std::make_unique<Impl>(options)) {}

SingleOperator::~SingleOperator() = default;

AcquireResult SingleOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  const detail::KeyNames names = detail::keyNames(impl_->prefix_, key);
  const std::string ttlText = std::to_string(ttl.count());
  return impl_->pool_.run([&](detail::Connection& connection) {
    const detail::ReplyPtr reply =
        detail::runScript(connection, detail::acquireScript(), {names.lock, names.fence}, {token, ttlText});
    return detail::readAcquireReply(*reply, impl_->where("lock", key));
  });
}

ReleaseResult SingleOperator::unlock(std::string_view key, std::string_view token) {
  const detail::KeyNames names = detail::keyNames(impl_->prefix_, key);
  return impl_->pool_.run([&](detail::Connection& connection) {
    const detail::ReplyPtr reply =
        detail::runScript(connection, detail::releaseScript(), {names.lock}, {token, names.channel});
    ReleaseResult result = detail::readReleaseReply(*reply, impl_->where("unlock", key));
    // Our own subscriber is not a waiter of another process.
    if (result.notified > 0 && impl_->subscriber_.subscribed(names.channel)) --result.notified;
    return result;
  });
}

bool SingleOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  const detail::KeyNames names = detail::keyNames(impl_->prefix_, key);
  const std::string ttlText = std::to_string(ttl.count());
  return impl_->pool_.run([&](detail::Connection& connection) {
    const detail::ReplyPtr reply = detail::runScript(connection, detail::extendScript(), {names.lock}, {token, ttlText});
    return detail::readFlagReply(*reply, impl_->where("extend", key));
  });
}

std::vector<bool> SingleOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  // One extendMany call per chunk, all chunks in one pipeline: the watchdog's renewals cost one
  // round trip and, up to kChunk leases, one command, however many keys are held.
  constexpr std::size_t kChunk = 5000;
  if (leases.empty()) return {};
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<std::string> lockKeys;
  lockKeys.reserve(leases.size());
  for (const auto& lease : leases) lockKeys.push_back(detail::keyNames(impl_->prefix_, lease.key).lock);
  std::vector<std::pair<detail::Argv, detail::Argv>> calls;
  for (std::size_t start = 0; start < leases.size(); start += kChunk) {
    const std::size_t end = std::min(leases.size(), start + kChunk);
    detail::Argv keys(lockKeys.begin() + static_cast<std::ptrdiff_t>(start), lockKeys.begin() + static_cast<std::ptrdiff_t>(end));
    detail::Argv args = {ttlText};
    for (std::size_t i = start; i < end; ++i) args.push_back(leases[i].token);
    calls.emplace_back(std::move(keys), std::move(args));
  }
  const std::string where = "extend " + std::to_string(leases.size()) + " lease(s) on " + impl_->pool_.address();
  return impl_->pool_.run([&](detail::Connection& connection) {
    const auto replies = detail::runScriptPipelined(connection, detail::extendManyScript(), calls);
    std::vector<bool> extended;
    extended.reserve(leases.size());
    for (std::size_t chunk = 0; chunk < replies.size(); ++chunk) {
      const auto flags = detail::readFlagsReply(*replies[chunk], calls[chunk].first.size(), where);
      extended.insert(extended.end(), flags.begin(), flags.end());
    }
    return extended;
  });
}

std::uint64_t SingleOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  const detail::KeyNames names = detail::keyNames(impl_->prefix_, key);
  const std::string wanted = std::to_string(atLeast);
  return impl_->pool_.run([&](detail::Connection& connection) {
    const detail::ReplyPtr reply = detail::runScript(connection, detail::raiseFenceScript(), {names.fence}, {wanted});
    return detail::readCountReply(*reply, impl_->where("raiseFence", key));
  });
}

std::unique_ptr<IReleaseWatch> SingleOperator::watch(std::string_view key) {
  return impl_->subscriber_.watch(detail::keyNames(impl_->prefix_, key).channel);
}

LeaseInfo SingleOperator::inspect(std::string_view key) {
  const detail::KeyNames names = detail::keyNames(impl_->prefix_, key);
  return impl_->pool_.run([&](detail::Connection& connection) {
    const detail::ReplyPtr reply = detail::runScript(connection, detail::inspectScript(), {names.lock, names.fence}, {});
    return detail::readInspectReply(*reply, impl_->where("inspect", key));
  });
}

std::string SingleOperator::describe() const { return "redis://" + impl_->pool_.address(); }

std::uint64_t SingleOperator::reconnects() const noexcept {
  return impl_->pool_.reconnects() + impl_->subscriber_.reconnects();
}

}  // namespace dlock
