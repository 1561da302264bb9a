// SPDX-License-Identifier: Apache-2.0
#include "TlsCertificates.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dlock::test {
namespace {

// P-256 keys (fast to make); certificates valid for two days, but the expired one, which only
// `openssl ca` can date in the past.
constexpr const char* kScript = R"(set -e
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj "/CN=dlock test CA"
openssl req -x509 $key -keyout other-ca.key -out other-ca.crt -days 2 -subj "/CN=dlock untrusted CA"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
printf 'subjectAltName=DNS:wrong.example.com\n' > wrong.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
make() {  # name, common name, extensions, CA, serial
  openssl req $key -keyout "$1.key" -out "$1.csr" -subj "/CN=$2"
  openssl x509 -req -in "$1.csr" -CA "$4.crt" -CAkey "$4.key" -set_serial "$5" -days 2 -extfile "$3" -out "$1.crt"
}
make server 127.0.0.1 server.ext ca 2
make client dlock-client client.ext ca 3
make wrong-name wrong.example.com wrong.ext ca 4
make other-ca-server 127.0.0.1 server.ext other-ca 5
mkdir db && : > db/index && echo 06 > db/serial
cat > ca.cnf <<CNF
[ca]
default_ca=test
[test]
database=db/index
serial=db/serial
new_certs_dir=db
default_md=sha256
policy=any
x509_extensions=ext
[any]
commonName=supplied
[ext]
subjectAltName=IP:127.0.0.1,DNS:localhost
CNF
openssl req $key -keyout expired.key -out expired.csr -subj "/CN=127.0.0.1"
openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext
)";

}  // namespace

TlsCertificates::TlsCertificates() {
  char pattern[] = "/tmp/dlock-tls-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = pattern;
  std::ofstream(dir_ + "/make.sh") << kScript;
  const std::string command = "cd '" + dir_ + "' && /bin/sh make.sh > make.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::string log;
    std::ifstream in(dir_ + "/make.log");
    std::getline(in, log, '\0');
    std::filesystem::remove_all(dir_);
    throw std::runtime_error("cannot make the test certificates with the openssl command (install openssl): " +
                             log.substr(log.size() > 600 ? log.size() - 600 : 0));
  }
}

TlsCertificates::~TlsCertificates() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace dlock::test
