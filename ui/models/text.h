// Small text helpers shared by the models.
#pragma once

#include <QString>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

namespace ringmaster::ui {

// A string field of `j`, or empty when absent or of another type.
inline QString qs(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>()) : QString();
}

// A name the engine spells (name_of(...)): its UTF-8, as a QString.
inline QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

inline QString size_text(std::uint64_t bytes) {
  return QString::number(static_cast<qulonglong>(bytes));
}

// "8 B", "64 KiB", "1.5 MiB".
inline QString human_size(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return (v == static_cast<double>(static_cast<qulonglong>(v)) ? QString::number(static_cast<qulonglong>(v))
                                                               : QString::number(v, 'f', 1)) +
         " " + units[u];
}

}  // namespace ringmaster::ui
