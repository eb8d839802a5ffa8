// Reading a JSON message the agent's protocol types come in (events,
// inventories): each field checked for its type, every error naming where
// it is ("event 'sample': channels[2]: 'bytes' is a string, not an
// integer"). Internal to the protocol library.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ringmaster/stage.h"
#include "ringmaster/status.h"

namespace ringmaster::agent::detail {

using nlohmann::json;

// The enum value whose name_of is `name`; nothing when none is.
template <class Enum>
std::optional<Enum> named(std::string_view name, Enum last) {
  for (int v = 0; v <= static_cast<int>(last); ++v) {
    if (name_of(static_cast<Enum>(v)) == name) return static_cast<Enum>(v);
  }
  return std::nullopt;
}

// Reads the fields of one object of an event, throwing Error(protocol)
// that names the event, the object within it and the field. A field that
// is absent takes its default unless required; one that is present must
// have its type.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), root_(std::move(where)) { must_be_object(); }

  std::string text(const char* key, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return {};
    if (!v->is_string()) wrong(key, *v, "a string");
    return v->get<std::string>();
  }
  bool flag(const char* key, bool fallback, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong(key, *v, "a boolean");
    return v->get<bool>();
  }
  double number(const char* key, double fallback = 0, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return fallback;
    if (!v->is_number()) wrong(key, *v, "a number");
    return v->get<double>();
  }
  template <class Int>
  Int integer(const char* key, Int fallback = 0, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return fallback;
    return integer_of<Int>(*v, key);
  }
  template <class Int>
  std::optional<Int> maybe_integer(const char* key) const {
    const json* v = find(key, false);
    if (!v) return std::nullopt;
    return integer_of<Int>(*v, key);
  }
  template <class Int>
  std::vector<Int> integers(const char* key) const {
    std::vector<Int> out;
    const json* v = find(key, false);
    if (!v) return out;
    if (!v->is_array()) wrong(key, *v, "an array");
    for (const auto& x : *v)
      out.push_back(integer_of<Int>(x, key));
    return out;
  }
  std::vector<std::string> texts(const char* key) const {
    std::vector<std::string> out;
    const json* v = find(key, false);
    if (!v) return out;
    if (!v->is_array()) wrong(key, *v, "an array");
    for (const auto& x : *v) {
      if (!x.is_string()) wrong(key, x, "an array of strings");
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  // Each object of an array field, read by `each` with its own Fields.
  template <class F>
  void each(const char* key, F&& each_one, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return;
    if (!v->is_array()) wrong(key, *v, "an array");
    for (std::size_t i = 0; i < v->size(); ++i)
      each_one(Fields((*v)[i], this, key, static_cast<std::ptrdiff_t>(i)));
  }
  // Each object of an array of arrays (a matrix), read by
  // `each_one(row, column, fields)`.
  template <class F>
  void each_cell(const char* key, F&& each_one) const {
    const json* v = find(key, false);
    if (!v) return;
    if (!v->is_array()) wrong(key, *v, "an array");
    for (std::size_t r = 0; r < v->size(); ++r) {
      const json& row = (*v)[r];
      if (!row.is_array()) wrong(key, row, "an array of arrays");
      for (std::size_t c = 0; c < row.size(); ++c)
        each_one(r, c, Fields(row[c], this, key, static_cast<std::ptrdiff_t>(r), static_cast<std::ptrdiff_t>(c)));
    }
  }
  // An object whose values are all strings.
  std::map<std::string, std::string> text_map(const char* key) const {
    std::map<std::string, std::string> out;
    const json* v = find(key, false);
    if (!v) return out;
    if (!v->is_object()) wrong(key, *v, "an object");
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it->is_string()) wrong(key, *it, "an object of strings");
      out.emplace(it.key(), it->get<std::string>());
    }
    return out;
  }
  // A field as it came, for a reader of its own.
  const json* raw(const char* key, bool required = false) const { return find(key, required); }
  // Where this object is, for errors ("event 'sample': channels[2]"): made
  // only when asked, so reading thousands of samples formats nothing.
  std::string where() const {
    if (!parent_) return root_;
    if (index_ < 0) return fmt::format("{}: {}", parent_->where(), key_);
    if (column_ < 0) return fmt::format("{}: {}[{}]", parent_->where(), key_, index_);
    return fmt::format("{}: {}[{}][{}]", parent_->where(), key_, index_, column_);
  }
  std::optional<Fields> object(const char* key, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return std::nullopt;
    return Fields(*v, this, key, -1);
  }
  Stage stage() const {
    const std::string name = text("stage", true);
    const auto s = named(name, Stage::ready);
    if (!s) throw Error(ErrorCategory::protocol, fmt::format("{}: 'stage' names no init stage: '{}'", where(), name));
    return *s;
  }
  template <class Enum>
  Enum enumerated(const char* key, Enum last) const {
    const std::string name = text(key, true);
    const auto e = named(name, last);
    if (!e)
      throw Error(ErrorCategory::protocol, fmt::format("{}: '{}' is not one of its names: '{}'", where(), key, name));
    return *e;
  }

 private:
  static std::string_view kind(const json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
  }
  const json* find(const char* key, bool required) const {
    const auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) throw Error(ErrorCategory::protocol, fmt::format("{}: '{}' is missing", where(), key));
      return nullptr;
    }
    return &*it;
  }
  [[noreturn]] void wrong(const char* key, const json& v, std::string_view need) const {
    throw Error(ErrorCategory::protocol, fmt::format("{}: '{}' is {}, not {}", where(), key, kind(v), need));
  }
  template <class Int>
  Int integer_of(const json& v, const char* key) const {
    static_assert(std::is_integral_v<Int>);
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<Int>::max())) wrong(key, v, "an integer in range");
      return static_cast<Int>(u);
    }
    if (!v.is_number_integer()) wrong(key, v, "an integer");
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<Int>) {
      if (i < 0) wrong(key, v, "an integer of at least 0");
    } else {
      if (i < static_cast<std::int64_t>(std::numeric_limits<Int>::min()) ||
          i > static_cast<std::int64_t>(std::numeric_limits<Int>::max())) {
        wrong(key, v, "an integer in range");
      }
    }
    return static_cast<Int>(i);
  }

  // An object inside `parent`: its field `key`, or element `index` of it.
  Fields(const json& j, const Fields* parent, const char* key, std::ptrdiff_t index, std::ptrdiff_t column = -1)
      : j_(j), parent_(parent), key_(key), index_(index), column_(column) {
    must_be_object();
  }
  void must_be_object() const {
    if (!j_.is_object())
      throw Error(ErrorCategory::protocol, fmt::format("{} is {}, not an object", where(), kind(j_)));
  }

  const json& j_;
  std::string root_;
  const Fields* parent_ = nullptr;  // outlives this: children are read inside their parent's reader
  const char* key_ = nullptr;
  std::ptrdiff_t index_ = -1, column_ = -1;
};

}  // namespace ringmaster::agent::detail
