// Where a --agents name points: a Kubernetes headless Service resolves to
// every agent's address. Shared by ringmaster-cli remote and the console.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::app {

// Every address `host` resolves to, one family (IPv4 when it has any: a
// dual-stack Service lists each Pod twice), sorted so that every client
// places ranks alike; empty when it does not resolve.
inline std::vector<std::string> addresses_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return {};
  std::vector<std::string> v4, v6;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
        ::inet_ntop(a->ai_family, raw, text, sizeof(text)) == nullptr)
      continue;
    auto& into = a->ai_family == AF_INET ? v4 : v6;
    if (std::find(into.begin(), into.end(), text) == into.end()) into.emplace_back(text);
  }
  ::freeaddrinfo(list);
  auto& out = v4.empty() ? v6 : v4;
  std::sort(out.begin(), out.end());
  return out;
}

// The lines of an agents file (--agents-file): one HOST:PORT, or a comma
// list, a line; `#` starts a comment; blanks are ignored. Nothing when the
// file cannot be read.
inline std::optional<std::vector<std::string>> agents_file_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    line.erase(std::remove_if(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); }), line.end());
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace ringmaster::app
