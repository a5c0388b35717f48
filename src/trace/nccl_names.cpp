// What the names and arguments of NCCL kernels and PyTorch's collective ops say: the operation,
// algorithm and protocol (ncclDevKernel_AllReduce_RING_LL_Sum_float), element counts, dtype and
// process group.
#include <algorithm>
#include <limits>

#include "trace/json_fields.hpp"
#include "trace/nccl_names.hpp"

namespace trainsim::trace {

using nlohmann::json;

std::string op_from_collective_name(std::string_view name) {
  // PyTorch's names ("allreduce", "_allgather_base", "all_to_all", "reduce_scatter_tensor_coalesced")
  std::string lower;
  for (const char c : name)
    if (c != '_') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("allreduce") != std::string::npos) return "all_reduce";
  if (lower.find("allgather") != std::string::npos) return "all_gather";
  if (lower.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (lower.find("alltoall") != std::string::npos) return "all_to_all";
  if (lower.find("broadcast") != std::string::npos) return "broadcast";
  if (lower.find("reduce") != std::string::npos) return "reduce";
  if (lower.find("send") != std::string::npos || lower.find("recv") != std::string::npos) return "send_recv";
  return std::string(name);
}

void read_collective_args(const json& args, Collective& c) {
  if (const auto it = args.find("Collective name"); it != args.end() && it->is_string())
    c.op = op_from_collective_name(it->get<std::string>());
  if (const auto it = args.find("In msg nelems"); it != args.end()) c.in_elements = as_int(*it, -1);
  if (const auto it = args.find("Out msg nelems"); it != args.end()) c.out_elements = as_int(*it, -1);
  if (const auto it = args.find("Group size"); it != args.end())
    c.group_size = static_cast<int>(std::clamp<std::int64_t>(as_int(*it, 0), 0, kMaxRank));
  if (const auto it = args.find("dtype"); it != args.end() && it->is_string()) c.dtype = it->get<std::string>();
  if (const auto it = args.find("Process Group Ranks"); it != args.end()) c.ranks = parse_rank_list(*it);
  if (const auto it = args.find("Process Group Name"); it != args.end() && it->is_string())
    c.group_name = it->get<std::string>();
  if (c.group_size == 0 && !c.ranks.empty()) c.group_size = static_cast<int>(c.ranks.size());
}

int dtype_bytes(std::string_view dtype) {
  std::string d;
  for (const char c : dtype) d += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d == "double" || d == "long" || d == "int64" || d == "float64") return 8;
  if (d == "float" || d == "float32" || d == "int" || d == "int32") return 4;
  if (d == "half" || d == "bfloat16" || d == "float16" || d == "short" || d == "int16") return 2;
  if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" || d.find("float8") == 0) return 1;
  return 0;
}

std::int64_t Collective::bytes() const {
  const int size = dtype_bytes(dtype);
  const auto elements = op == "all_gather" ? std::max(in_elements, out_elements) : in_elements;
  // an element count whose bytes overflow is as unknown as a missing one
  if (size == 0 || in_elements < 0 || elements > std::numeric_limits<std::int64_t>::max() / size) return -1;
  return elements * size;
}

std::optional<Collective> collective_from_kernel_name(std::string_view name) {
  const auto paren = name.find('(');
  const auto base = name.substr(0, paren);
  std::string_view rest;
  if (base.rfind("ncclKernel_", 0) == 0)
    rest = base.substr(11);
  else if (base.rfind("ncclDevKernel_", 0) == 0)
    rest = base.substr(14);
  else
    return std::nullopt;
  // <Coll>_<ALGO>_<PROTO>_<Op>_<type>; newer ones may stop after <Coll>
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= rest.size()) {
    const auto end = std::min(rest.find('_', start), rest.size());
    parts.push_back(rest.substr(start, end - start));
    start = end + 1;
  }
  Collective c;
  c.op = op_from_collective_name(parts.front());
  if (parts.size() >= 3) {
    c.algorithm = std::string(parts[1]);
    c.protocol = std::string(parts[2]);
  }
  return c;
}

}  // namespace trainsim::trace
