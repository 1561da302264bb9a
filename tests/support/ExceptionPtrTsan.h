// SPDX-License-Identifier: Apache-2.0
// ExceptionPtrTsan.h — for a test binary whose exceptions cross threads inside std::exception_ptr
// (acquireAsync's errors, made on dlock's threads, rethrown by future::get() on the test's):
// libstdc++ counts an exception's owners with atomics in its own, uninstrumented code, so
// ThreadSanitizer cannot see that the last owner frees the exception only after every other owner
// let go, and reports the free as a race with an earlier read. The suppression names exactly that
// free (exception_ptr's release); include this header in one source file of the binary.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier)
  return "race:std::__exception_ptr::exception_ptr::_M_release\n";
}
#endif
