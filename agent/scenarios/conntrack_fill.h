// Fills a network namespace's connection-tracking table to its limit, as
// a node's table fills in the field (kube-proxy, a busy service, a scan):
// with established, assured TCP entries, which the kernel never evicts to
// make room, so every new connection through that namespace is dropped.
#pragma once

#include <string>

namespace ringmaster::agent {

struct ConntrackFill {
  long long inserted = 0;
  long long count = 0, max = 0;  // the table afterwards
  // Why this machine cannot stage a full table (connection tracking not
  // loaded, a limit too large to fill); empty when it was filled.
  std::string cannot;
};

// Inserts entries through ctnetlink into the table of the calling
// thread's network namespace until it holds nf_conntrack_max entries; the
// entries live until the namespace goes. A limit above 4 Mi entries (it
// would take gigabytes of kernel memory) or no connection tracking at all
// is said in `cannot`; throws Error(config) naming what failed otherwise.
ConntrackFill fill_conntrack_table();

}  // namespace ringmaster::agent
