#pragma once
// A simulated step as MLCommons Chakra execution traces (docs/traces.md "Chakra"): one file per
// simulated rank, DIR/trainsim.<rank>.et (length-delimited protobuf: the global metadata, then one
// Node per task of the rank), and DIR/comm_group.json naming each process group's ranks, as
// ASTRA-sim reads them.
#include <cstdint>
#include <string>

#include "trainsim/lower/lowering.hpp"
#include "trainsim/sim/timeline.hpp"
#include "trainsim/spec/job.hpp"

namespace trainsim::report {

struct ChakraExport {
  int files = 0;
  std::int64_t nodes = 0;
  std::int64_t data_deps = 0;
  std::int64_t ctrl_deps = 0;
  std::int64_t comm_bytes = 0;  // comm_size summed over the communication nodes
};

// `lowered` must have been lowered with LoweringOptions::record_work.
ChakraExport write_chakra(const spec::Job& job, const lower::Lowered& lowered, const sim::Timeline& timeline,
                          const std::string& dir);

}  // namespace trainsim::report
