// XML helpers shared by the NCCL and hwloc readers: parsing with errors
// that name the file and line.
#pragma once

#include <pugixml.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/tools/topology.h"

namespace ringmaster::topo {

// What a topology file may hold: a DGX has a few hundred elements and a
// depth near 10.
inline constexpr std::size_t kMaxTopologyBytes = 16u << 20;
inline constexpr int kMaxTopologyDepth = 64;
inline constexpr std::size_t kMaxTopologyElements = 100'000;

// 1-based line of a byte offset into `text` (a pass over the text up to it:
// for one error message).
int line_of(std::string_view text, std::ptrdiff_t offset);

// The line of every element a reader records: one pass over the text,
// then each lookup a binary search (line_of for each of 90,000 elements
// of a 5 MB file was a pass each: minutes).
class LineIndex {
 public:
  explicit LineIndex(std::string_view text);
  int line_of(std::ptrdiff_t offset) const;

 private:
  std::vector<std::size_t> newlines_;  // offsets of '\n', ascending
};

// Parses `text` into `doc` and returns its root element. Throws
// Error(config) "<source>:<line>: malformed XML: <why>", "<source>: empty
// file" when there is no element at all, or names the cap a file passes
// (size, depth, element count).
pugi::xml_node parse_xml(pugi::xml_document& doc, std::string_view text, std::string_view source);

std::string xml_escape(std::string_view text);

// The NCCL reader behind Topology::from_nccl_xml, for an already parsed
// document.
Topology read_nccl_document(std::string_view text, std::string_view source, const pugi::xml_node& root,
                            const LoadOptions& options);
// The hwloc reader behind Topology::from_hwloc_xml.
Topology read_hwloc_xml(std::string_view text, std::string_view source);
// The version of the hwloc library loaded at run time ("2.9.0").
std::string hwloc_library_version();

}  // namespace ringmaster::topo
