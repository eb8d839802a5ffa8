// The certificate an agent makes for itself (--tls-self-signed), so that
// what we ship serves TLS beyond loopback without an operator's PKI.
#pragma once

#include <string>

namespace ringmaster::agent {

struct SelfSignedCertificate {
  std::string cert_file, key_file;
  std::string sha256;  // of the certificate (DER), colon-separated hex as `openssl x509 -fingerprint` prints it
  bool made = false;   // made now (false: the one an earlier start made)
};

// DIR/agent.crt and DIR/agent.key: made on the first call (an ECDSA P-256
// key, mode 0600; the certificate valid for ten years, for this host's
// name, localhost, and every address this host has now), and read as they
// are afterwards, so clients that pinned it (`--tls-ca DIR/agent.crt`)
// keep working across restarts. Throws Error(config) when DIR cannot hold
// them or what is there is not a certificate and its key.
SelfSignedCertificate self_signed_certificate(const std::string& dir);

}  // namespace ringmaster::agent
