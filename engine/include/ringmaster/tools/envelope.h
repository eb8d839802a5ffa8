// The expected envelope of a declared cluster: what nccl-tests should
// reach on `nodes` instances of a type, as the simulator predicts it
// (tools/simulate.h), beside the published runs its figures were fitted
// on or are checked against, each with its source. `certify` compares a
// cluster's sweeps with it; a gate set above what it allows is refused
// with the published number.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/tools/simulate.h"
#include "ringmaster/tools/topology.h"

namespace ringmaster::tune {

// One published nccl-tests run (out of place, float sum): its busbw at
// `bytes`, or its time where the run gave that (small sizes).
struct PublishedRun {
  std::string_view instance;  // a profile's name
  int nodes = 1;
  Collective collective = Collective::all_reduce;
  std::size_t bytes = 0;
  double busbw_gbs = 0;  // 0: the run gave a time
  double time_us = 0;
  bool fitted = false;      // a profile figure was fitted on it (else it checks them)
  std::string_view source;  // where it was published
};

// Every published run the profiles were fitted on or are checked against
// (docs/tuner.md, "Against published runs").
std::span<const PublishedRun> published_runs();

// How far a published run may lie from the simulator's prediction:
// within 25% for busbw from 1 GiB, within 2x for a time; fitted runs
// within 5%.
bool within_envelope_bounds(const PublishedRun& run, double predicted);

struct Envelope {
  std::string instance;
  int nodes = 0;
  Collective collective = Collective::all_reduce;
  std::size_t bytes = 0;
  double predicted_busbw_gbs = 0;
  double predicted_time_us = 0;
  double tolerance = 0.25;
  // The least a healthy cluster reaches: the prediction less the
  // tolerance.
  double least_busbw_gbs() const { return predicted_busbw_gbs * (1 - tolerance); }
  // The runs of this instance type and collective, nearest in node count
  // first, then in size.
  std::vector<PublishedRun> published;
  // Where the cluster was declared by a node's topology file: the file,
  // what it declares and what it was recognised as ("p5.48xl-topo.xml: 8
  // GPUs (sm_90), 32 NICs, a p5.48xlarge or p5e.48xlarge"); empty for an
  // instance type named.
  std::string declared_by;
  // "p5.48xlarge x 8, all_reduce at 1 GiB: 276.1 GB/s predicted, at least
  // 207.1 within 25%; published 274.5 GB/s at 1 GiB on 8 nodes
  // (crazyguitar/...)"
  std::string describe() const;
};

// The envelope at `bytes`; none for a collective the model does not cover
// (all_to_all, send/recv). Throws Error(config) for an unknown instance,
// nodes < 1 or a tolerance outside [0, 1).
std::optional<Envelope> expected_envelope(std::string_view instance, int nodes, Collective c, std::size_t bytes,
                                          double tolerance = 0.25);

// The instance profiles a node's topology file may describe: as many GPUs
// and NICs as the file declares, and the GPUs' model (PCI device id) and
// compute capability (sm) where the file gives them. Several when files
// alike serve several types (AWS's p5 file serves p5 and p5e).
std::vector<const InstanceProfile*> profiles_declared_by(const topo::Topology& node);

// What the file declares, in words: "8 GPUs (A100 SXM4 40GB), 4 NICs".
std::string declared_node_text(const topo::Topology& node);

// The envelope of `nodes` nodes that a topology file declares. With
// `instance` empty, the file recognised as an instance type (the first of
// profiles_declared_by: that type's prediction and published runs) or,
// recognised as none, the simulator's prediction of its declared shape
// (tune::declared_shape), with no published run. With `instance` named,
// that type's envelope, the file checked to have its GPU and NIC counts.
// Throws Error(config) for a file that declares no GPU or disagrees with
// the instance named.
std::optional<Envelope> expected_envelope(const topo::Topology& node, std::string_view instance, int nodes,
                                          Collective c, std::size_t bytes, double tolerance = 0.25);

// A gate (a busbw a user requires) above what the envelope allows (the
// prediction or the best published run at these nodes and that size,
// whichever is higher, plus the tolerance): why, naming the published
// number; empty when the gate is reachable.
std::string gate_refusal(const Envelope& e, double gate_gbs);

}  // namespace ringmaster::tune
