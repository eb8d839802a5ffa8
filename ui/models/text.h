// Small text helpers shared by the models.
#pragma once

#include <QString>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ringmaster::ui {

// A string field of `j`, or empty when absent or of another type.
inline QString qs(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>()) : QString();
}

// "NAME=VALUE NAME2=VALUE2" (a field for the ranks' environment) into
// `into`; false, with the word that is no assignment in `bad`, otherwise.
inline bool read_assignments(const QString& text, std::map<std::string, std::string>& into, QString* bad) {
  for (const QString& kv : text.split(' ', Qt::SkipEmptyParts)) {
    const auto eq = kv.indexOf('=');
    if (eq <= 0) {
      if (bad) *bad = kv;
      return false;
    }
    into[kv.left(eq).toStdString()] = kv.mid(eq + 1).toStdString();
  }
  return true;
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
