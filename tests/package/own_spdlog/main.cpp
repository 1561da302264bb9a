// SPDX-License-Identifier: Apache-2.0
// An application with a header-only spdlog of its own (and fmt), as one that vendors them has.
// dlock's flags must leave that spdlog as the application configured it: no installed dlock header
// needs spdlog or hiredis, so neither their compile definitions nor their include paths come along.
#if defined(SPDLOG_COMPILED_LIB) || defined(SPDLOG_SHARED_LIB) || defined(SPDLOG_FMT_EXTERNAL)
#error "dlock passed spdlog's compile definitions on to its consumer"
#endif
#if __has_include(<hiredis.h>)
#error "dlock put hiredis's include directory on its consumer's include path"
#endif
#ifdef _FILE_OFFSET_BITS
#error "dlock passed hiredis's -D_FILE_OFFSET_BITS on to its consumer"
#endif

// The application's own choice: spdlog and fmt header-only (Debian's spdlog headers come without
// the bundled fmt, so the external one, header-only too).
#define SPDLOG_FMT_EXTERNAL
#define FMT_HEADER_ONLY
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <dlock/dlock.h>

#include <memory>
#include <sstream>

int main() {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger app("app", sink);
  app.set_pattern("%v");

  auto lock = dlock::LockBuilder().backend(dlock::connect("memory://")).build();
  if (!lock->tryLock("own-spdlog")) return 1;
  app.info("held, fencing token {}", lock->fencingToken("own-spdlog"));
  lock->unlock("own-spdlog");
  return out.str().rfind("held, fencing token ", 0) == 0 ? 0 : 1;
}
