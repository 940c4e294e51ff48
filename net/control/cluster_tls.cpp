#include "net/control/cluster_tls.h"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "kernels/check.h"
#include "net/control/openssl_shims.h"

namespace troupe::net::control {

namespace {

template <class T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509, X509_free>>;

std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no reason given";
  std::array<char, 256> buf{};
  ERR_error_string_n(e, buf.data(), buf.size());
  return buf.data();
}

#define TLS_CHECK(ok, what) \
  if (!(ok)) TROUPE_FAIL("cluster TLS: " << what << ": " << openssl_reason())

// scrypt with N = 2^15, r = 8, p = 1 (32 MiB, about 0.1 s): the cost of one guess for
// whoever holds the public key. The salt names the purpose, so this key is not what any
// other program would derive from the same secret.
std::array<unsigned char, 32> derive_seed(const std::string& secret) {
  static constexpr char kSalt[] = "troupe cluster control-plane key v1";
  std::array<unsigned char, 32> seed{};
  TLS_CHECK(EVP_PBE_scrypt(secret.data(), secret.size(),
                           reinterpret_cast<const unsigned char*>(kSalt), sizeof kSalt - 1,
                           uint64_t{1} << 15, 8, 1, uint64_t{64} << 20, seed.data(),
                           seed.size()) == 1,
            "scrypt");
  return seed;
}

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  TLS_CHECK(ext != nullptr, "certificate extension " << value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  TLS_CHECK(ok == 1, "certificate extension " << value);
}

// Every field is fixed and Ed25519 signs deterministically, so every node makes the same
// certificate bytes: each node's one file is both its own certificate and the only
// authority it trusts. Valid from 2024 to 9999: a key that changes only with the secret
// has nothing to expire.
Cert self_signed(EVP_PKEY* key) {
  Cert cert(X509_new());
  TLS_CHECK(cert != nullptr, "X509_new");
  TLS_CHECK(X509_set_version(cert.get(), 2) == 1, "version");
  TLS_CHECK(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1) == 1, "serial");
  X509_NAME* name = X509_get_subject_name(cert.get());
  TLS_CHECK(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                       reinterpret_cast<const unsigned char*>("troupe cluster"),
                                       -1, -1, 0) == 1,
            "subject");
  TLS_CHECK(X509_set_issuer_name(cert.get(), name) == 1, "issuer");
  TLS_CHECK(ASN1_TIME_set_string(X509_getm_notBefore(cert.get()), "240101000000Z") == 1,
            "notBefore");
  TLS_CHECK(ASN1_TIME_set_string(X509_getm_notAfter(cert.get()), "99991231235959Z") == 1,
            "notAfter");
  TLS_CHECK(X509_set_pubkey(cert.get(), key) == 1, "public key");
  add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_extension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_extension(cert.get(), NID_subject_key_identifier, "hash");
  TLS_CHECK(X509_sign(cert.get(), key, nullptr) > 0, "signing the certificate");  // Ed25519: no digest
  return cert;
}

std::string hex_fingerprint(EVP_PKEY* key) {
  std::array<unsigned char, 32> pub{};
  size_t len = pub.size();
  TLS_CHECK(EVP_PKEY_get_raw_public_key(key, pub.data(), &len) == 1, "public key bytes");
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int md_len = 0;
  TLS_CHECK(EVP_Digest(pub.data(), len, md.data(), &md_len, EVP_sha256(), nullptr) == 1,
            "fingerprint");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < 8; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

// Writes through `write` into a new file only this user may read.
template <class Write>
void write_private_file(const std::string& path, Write write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) TROUPE_FAIL("cluster TLS: cannot create " << path);
  FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    TROUPE_FAIL("cluster TLS: cannot open " << path);
  }
  const bool ok = write(f);
  if (std::fclose(f) != 0 || !ok) TROUPE_FAIL("cluster TLS: cannot write " << path);
}

}  // namespace

ClusterTls::ClusterTls(const std::string& secret) {
  TROUPE_CHECK(!secret.empty(), "cluster TLS needs the cluster secret");
  const std::array<unsigned char, 32> seed = derive_seed(secret);
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  TLS_CHECK(key != nullptr, "Ed25519 key");
  const Cert cert = self_signed(key.get());
  fingerprint_ = hex_fingerprint(key.get());

  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/troupe-tls-XXXXXX";
  if (!::mkdtemp(templ.data())) TROUPE_FAIL("cluster TLS: cannot make a directory " << templ);
  dir_ = templ;  // mkdtemp: mode 0700
  cert_file_ = dir_ + "/cluster.crt";
  key_file_ = dir_ + "/cluster.key";
  try {
    write_private_file(cert_file_, [&](FILE* f) { return PEM_write_X509(f, cert.get()) == 1; });
    write_private_file(key_file_, [&](FILE* f) {
      return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
    });
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

ClusterTls::~ClusterTls() {
  std::error_code ec;  // best effort: a leftover 0700 directory is no leak of the secret
  std::filesystem::remove_all(dir_, ec);
}

void ClusterTls::apply(caf::actor_system_config& cfg) const {
  cfg.openssl_certificate = cert_file_;
  cfg.openssl_key = key_file_;
  cfg.openssl_cafile = cert_file_;  // the one authority: the cluster's own certificate
  cfg.load<caf::openssl::manager>();
  log_refused_handshakes();
}

}  // namespace troupe::net::control
