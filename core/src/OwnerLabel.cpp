// SPDX-License-Identifier: Apache-2.0
#include "OwnerLabel.h"

#include <unistd.h>

#include <array>
#include <climits>

namespace dlock::detail {

std::string ownerLabel(std::string_view text) {
  std::array<char, HOST_NAME_MAX + 1> host{};
  // A name that fills the buffer may lack its terminator; the last byte stays '\0'.
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string label = "host=";
  label.append(host[0] != '\0' ? host.data() : "?").append(" pid=").append(std::to_string(::getpid()));
  if (!text.empty()) label.append(" ").append(text);
  return label;
}

}  // namespace dlock::detail
