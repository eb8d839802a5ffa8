#include "self_signed.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "ringmaster/status.h"

namespace ringmaster::agent {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const noexcept {
    Free(p);
  }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorCategory::config, fmt::format("--tls-self-signed: {}", what));
}

// This host's names and addresses now: what a client may dial.
std::string subject_alt_names() {
  std::set<std::string> names = {"DNS:localhost", "IP:127.0.0.1", "IP:::1"};
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') names.insert(std::string("DNS:") + host);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
      } else {
        const auto* v6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;  // needs a scope, which no certificate names
        ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      }
      names.insert(std::string("IP:") + text);
    }
    ::freeifaddrs(list);
  }
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ",") + n;
  return out;
}

void add_extension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  if (!extension || X509_add_ext(cert, extension, -1) != 1) fail(fmt::format("cannot add the extension {}", value));
  X509_EXTENSION_free(extension);
}

void write_pem(const std::string& path, mode_t mode, const std::function<int(BIO*)>& write) {
  const std::string temporary = path + ".new";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) fail(fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
  Bio out(BIO_new(BIO_s_mem()));
  if (!out || write(out.get()) != 1) {
    ::close(fd);
    fail(fmt::format("OpenSSL could not encode {}", path));
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  const bool written = size > 0 && ::write(fd, data, static_cast<std::size_t>(size)) == size && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    fail(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

std::string fingerprint(X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &size) != 1) fail("cannot digest the certificate");
  std::string out;
  for (unsigned int i = 0; i < size; ++i)
    out += fmt::format("{}{:02X}", i ? ":" : "", digest[i]);
  return out;
}

Cert read_certificate(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(path.c_str(), "re"), &std::fclose);
  if (!in) fail(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  Cert cert(PEM_read_X509(in.get(), nullptr, nullptr, nullptr));
  if (!cert) fail(fmt::format("{} is not a PEM certificate; remove it (and its key) to have a new one made", path));
  return cert;
}

}  // namespace

SelfSignedCertificate self_signed_certificate(const std::string& dir) {
  SelfSignedCertificate out{dir + "/agent.crt", dir + "/agent.key", "", false};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(fmt::format("cannot make {}: {}", dir, ec.message()));
  ::chmod(dir.c_str(), 0700);
  const bool have_cert = std::filesystem::exists(out.cert_file), have_key = std::filesystem::exists(out.key_file);
  if (have_cert && have_key) {
    out.sha256 = fingerprint(read_certificate(out.cert_file).get());
    return out;
  }
  if (have_cert != have_key) {
    fail(fmt::format("{} is there without {}; remove it to have both made anew",
                     have_cert ? out.cert_file : out.key_file, have_cert ? out.key_file : out.cert_file));
  }
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("OpenSSL could not make a P-256 key");
  Cert cert(X509_new());
  if (!cert) fail("OpenSSL could not make a certificate");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) fail("no random serial number");
  serial[0] &= 0x7f;  // positive
  BIGNUM* number = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(number, X509_get_serialNumber(cert.get()));
  BN_free(number);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // clocks a little behind still accept it
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string common_name = fmt::format("ringmaster-agent {}", host[0] ? host : "localhost").substr(0, 64);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  // Its own issuer, so that a client may trust this one certificate as its
  // CA (`--tls-ca agent.crt`); it signs nothing else.
  add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_extension(cert.get(), NID_ext_key_usage, "serverAuth");
  add_extension(cert.get(), NID_subject_key_identifier, "hash");
  add_extension(cert.get(), NID_subject_alt_name, subject_alt_names());
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) fail("OpenSSL could not sign the certificate");
  write_pem(out.key_file, 0600,
            [&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  write_pem(out.cert_file, 0644, [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  out.sha256 = fingerprint(cert.get());
  out.made = true;
  return out;
}

}  // namespace ringmaster::agent
