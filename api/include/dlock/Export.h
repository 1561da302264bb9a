// SPDX-License-Identifier: Apache-2.0
// Export.h — DLOCK_API marks types whose typeinfo must be visible across a shared-library
// boundary (exceptions above all), so a catch in the application matches a throw in dlock
// even when dlock is built with hidden visibility.
#pragma once

#if defined(_WIN32)
#define DLOCK_API
#else
#define DLOCK_API __attribute__((visibility("default")))
#endif
