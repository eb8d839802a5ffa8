// How many CPUs this host gives its ranks: the CPUs online, bounded by the
// cgroup CPU quota (a Kubernetes limit, docker --cpus) when one is set.
// std::thread::hardware_concurrency() counts the machine's CPUs, which a
// pod with a 4-CPU limit on a 192-core node is not given. Not the
// affinity mask: ranks bound one to a CPU each see a single CPU there,
// yet none waits for another's.
#pragma once

#include <string_view>

namespace ringmaster::base {

// At least 1.
int host_cpus();

// The quota in CPUs (rounded up) from cgroup v2's cpu.max text ("max
// 100000" or "400000 100000"); 0 when there is no limit or the text is
// not understood.
int cpus_from_cpu_max(std::string_view text);

}  // namespace ringmaster::base
