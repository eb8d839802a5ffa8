// The completion levels of a CLI11 application: every subcommand and
// option it shows in --help (hidden aliases stay hidden), recursively.
#pragma once

#include <CLI/CLI.hpp>

#include "completion.h"

namespace ringmaster::app {

inline void collect_completion(const CLI::App& app, const std::string& path, std::vector<CompletionLevel>& out) {
  CompletionLevel level{path, {}};
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden
    level.words.push_back(sub->get_name());
  }
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;  // hidden alias
    for (const auto& s : o->get_snames())
      level.words.push_back("-" + s);
    for (const auto& l : o->get_lnames())
      level.words.push_back("--" + l);
  }
  out.push_back(std::move(level));
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;
    collect_completion(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
}

inline std::string bash_completion_script(const CLI::App& app, std::string_view program) {
  std::vector<CompletionLevel> levels;
  collect_completion(app, "", levels);
  return bash_completion_script(program, levels);
}

}  // namespace ringmaster::app
