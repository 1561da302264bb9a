// SPDX-License-Identifier: Apache-2.0
// TlsCertificates.h — the certificates of one test's TLS servers and clients, made at test time
// with the `openssl` command in a temporary directory removed on destruction:
//
//   ca            the test CA, trusted by servers (client certificates) and clients (tls_ca_file)
//   server        signed by ca, for IP 127.0.0.1 and DNS localhost; also the servers' client
//                 certificate on replication and cluster links
//   client        signed by ca, for mutual TLS
//   expired       as server, valid only in January 2020
//   wrongName     signed by ca, for wrong.example.com only
//   otherCa       as server, signed by another CA that nobody trusts
//
// A missing `openssl` command or a failed step is an error naming it. Not thread-safe.
#pragma once

#include <string>

namespace dlock::test {

class TlsCertificates {
 public:
  struct Pair {
    std::string cert;
    std::string key;
  };

  TlsCertificates();
  TlsCertificates(const TlsCertificates&) = delete;
  TlsCertificates& operator=(const TlsCertificates&) = delete;
  ~TlsCertificates();

  [[nodiscard]] const std::string& directory() const { return dir_; }
  [[nodiscard]] std::string caFile() const { return dir_ + "/ca.crt"; }
  [[nodiscard]] Pair server() const { return pair("server"); }
  [[nodiscard]] Pair client() const { return pair("client"); }
  [[nodiscard]] Pair expired() const { return pair("expired"); }
  [[nodiscard]] Pair wrongName() const { return pair("wrong-name"); }
  [[nodiscard]] Pair otherCa() const { return pair("other-ca-server"); }

 private:
  [[nodiscard]] Pair pair(const std::string& name) const { return {dir_ + "/" + name + ".crt", dir_ + "/" + name + ".key"}; }

  std::string dir_;
};

}  // namespace dlock::test
