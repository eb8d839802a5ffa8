// The Ringmaster engine's public API in one include: communicators and
// their collectives (comm.h), the configuration they start from
// (config.h), the init stages they report (stage.h), errors (status.h),
// the call vocabulary (types.h), torch's TCPStore protocol (store.h) and
// the version macros (version.h).
//
// Tools built on the engine's internals (the tuner, topology discovery
// and search, the bootstrap alone, the perf harness, the parameter
// registry) are in ringmaster/tools/ and may change between releases.
#pragma once

#include "ringmaster/comm.h"
#include "ringmaster/config.h"
#include "ringmaster/stage.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"
#include "ringmaster/types.h"
#include "ringmaster/version.h"
