// SPDX-License-Identifier: Apache-2.0
#include "uri/UriScheme.h"

namespace dlock::detail {

const UriScheme* findScheme(std::string_view name) {
  for (const UriScheme* scheme : uriSchemes()) {
    if (scheme->name == name) return scheme;
  }
  return nullptr;
}

const UriOption* anyOption(std::string_view name) {
  for (const UriScheme* scheme : uriSchemes()) {
    for (const auto* options : {&scheme->options, &scheme->memberOptions}) {
      for (const UriOption& option : *options) {
        if (option.name == name) return &option;
      }
    }
  }
  return nullptr;
}

}  // namespace dlock::detail
