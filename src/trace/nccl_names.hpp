#pragma once
// Collective metadata of trace events. Private to trace/ (collective_from_kernel_name and
// dtype_bytes are public, in trainsim/trace/trace.hpp).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainsim/trace/trace.hpp"

namespace trainsim::trace {

// PyTorch's names ("allreduce", "_allgather_base", "all_to_all") as trainsim's operations.
std::string op_from_collective_name(std::string_view name);
// Collective metadata in an event's args (PyTorch ≥ 2.1 kernels, record_param_comms ops).
void read_collective_args(const nlohmann::json& args, Collective& c);

}  // namespace trainsim::trace
