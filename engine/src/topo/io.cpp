// Reading topology files: which kind a file is, and errors that name it.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "topo/xml.h"

namespace ringmaster::topo {

int line_of(std::string_view text, std::ptrdiff_t offset) {
  if (offset < 0) return 0;
  const auto end = text.begin() + std::min<std::ptrdiff_t>(offset, static_cast<std::ptrdiff_t>(text.size()));
  return 1 + static_cast<int>(std::count(text.begin(), end, '\n'));
}

LineIndex::LineIndex(std::string_view text) {
  for (std::size_t at = text.find('\n'); at != std::string_view::npos; at = text.find('\n', at + 1))
    newlines_.push_back(at);
}

int LineIndex::line_of(std::ptrdiff_t offset) const {
  if (offset < 0) return 0;
  // Lines before it: the newlines at offsets below it.
  const auto before = std::lower_bound(newlines_.begin(), newlines_.end(), static_cast<std::size_t>(offset));
  return 1 + static_cast<int>(before - newlines_.begin());
}

pugi::xml_node parse_xml(pugi::xml_document& doc, std::string_view text, std::string_view source) {
  if (text.size() > kMaxTopologyBytes) {
    throw Error(ErrorCategory::config, fmt::format("{}: {} bytes; a topology file is at most {} MiB", source,
                                                   text.size(), kMaxTopologyBytes >> 20));
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw Error(ErrorCategory::config,
                fmt::format("{}: empty file; expected NCCL topology XML (<system>) or hwloc XML (<topology>)", source));
  }
  const auto result = doc.load_buffer(text.data(), text.size(), pugi::parse_default);
  if (!result) {
    throw Error(ErrorCategory::config,
                fmt::format("{}:{}: malformed XML: {}", source, line_of(text, result.offset), result.description()));
  }
  const pugi::xml_node root = doc.document_element();
  if (!root) throw Error(ErrorCategory::config, fmt::format("{}: no XML element in the file", source));
  // The readers walk the tree recursively, and a machine has a few
  // thousand elements: a deeper or larger file is refused before them,
  // walking it here without recursion.
  std::size_t elements = 0;
  std::vector<std::pair<pugi::xml_node, int>> pending = {{root, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxTopologyDepth) {
      throw Error(ErrorCategory::config, fmt::format("{}:{}: elements nested deeper than {} levels", source,
                                                     line_of(text, node.offset_debug()), kMaxTopologyDepth));
    }
    if (++elements > kMaxTopologyElements) {
      throw Error(ErrorCategory::config, fmt::format("{}:{}: more than {} elements", source,
                                                     line_of(text, node.offset_debug()), kMaxTopologyElements));
    }
    for (const auto& child : node.children()) {
      if (child.type() == pugi::node_element) pending.emplace_back(child, depth + 1);
    }
  }
  return root;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Topology Topology::load_file(const std::string& path, const LoadOptions& options) {
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(ErrorCategory::config, fmt::format("{}: cannot open topology file: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorCategory::config, fmt::format("{}: not a regular file (a topology file is)", path));
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxTopologyBytes) {
    throw Error(ErrorCategory::config, fmt::format("{}: {} bytes; a topology file is at most {} MiB", path, st.st_size,
                                                   kMaxTopologyBytes >> 20));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorCategory::config, fmt::format("{}: cannot open topology file: {}", path, std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  pugi::xml_document doc;
  const pugi::xml_node root = parse_xml(doc, text, path);
  const std::string_view name = root.name();
  if (name == "system") return read_nccl_document(text, path, root, options);
  if (name == "topology") return read_hwloc_xml(text, path);
  throw Error(ErrorCategory::config,
              fmt::format("{}:{}: root element <{}> is neither NCCL's <system> nor hwloc's <topology>", path,
                          line_of(text, root.offset_debug()), name));
}

}  // namespace ringmaster::topo
