// SPDX-License-Identifier: Apache-2.0
// The options of every TLS scheme (rediss://, rediss+sentinel://, rediss+cluster://), and what they set.
#include "dlock/LockError.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kCaFile{"tls_ca_file", UriOptionType::Text, "PEM file of the CAs to trust (default: the system's)"};
constexpr UriOption kCaDir{"tls_ca_dir", UriOptionType::Text, "directory of hashed CA certificates to trust"};
constexpr UriOption kCertFile{"tls_cert_file", UriOptionType::Text, "client certificate (PEM), for mutual TLS"};
constexpr UriOption kKeyFile{"tls_key_file", UriOptionType::Text, "the client certificate's private key (PEM)"};
constexpr UriOption kServerName{"tls_server_name", UriOptionType::Text,
                                "the name sent as SNI and verified (default: the host)"};
constexpr UriOption kVerify{"tls_verify", UriOptionType::Text, "full (the default) or none: no certificate check"};

}  // namespace

std::vector<UriOption> withTlsOptions(std::vector<UriOption> own) {
  own.insert(own.end(), {kCaFile, kCaDir, kCertFile, kKeyFile, kServerName, kVerify});
  return own;
}

void checkTlsOptions(const UriParser& parser, ParsedUri& uri) {
  const std::string verify = textOf(uri, kVerify, "full");
  if (verify != "full" && verify != "none") parser.fail("option tls_verify must be full or none");
  if (uri.options.count("tls_cert_file") != uri.options.count("tls_key_file")) {
    parser.fail("options tls_cert_file and tls_key_file go together (mutual TLS)");
  }
  for (const UriOption* file : {&kCaFile, &kCaDir, &kCertFile, &kKeyFile, &kServerName}) {
    const auto it = uri.options.find(std::string(file->name));
    if (it == uri.options.end()) continue;
    if (it->second.empty()) parser.fail("option " + std::string(file->name) + " is empty");
    // A path or a name ends at a NUL for OpenSSL and the kernel: "/ca.pem%00x" would load "/ca.pem".
    if (it->second.find('\0') != std::string::npos) {
      parser.fail("option " + std::string(file->name) + " holds a NUL byte (%00)");
    }
  }
}

TlsOptions tlsFrom(const ParsedUri& uri) {
  TlsOptions tls;
  const UriScheme* scheme = findScheme(uri.scheme);
  if (scheme == nullptr || !scheme->tls) return tls;
  tls.enabled = true;
  tls.caFile = textOf(uri, kCaFile);
  tls.caDir = textOf(uri, kCaDir);
  tls.certFile = textOf(uri, kCertFile);
  tls.keyFile = textOf(uri, kKeyFile);
  tls.serverName = textOf(uri, kServerName);
  tls.verify = textOf(uri, kVerify, "full") != "none";
  return tls;
}

}  // namespace dlock::detail
