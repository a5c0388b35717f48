#pragma once
// What fails, how checkpoints are written and how a job restarts (docs/goodput.md): the input of
// `trainsim goodput`. Rates are per unit (a GPU, a node, or the job) and hour, given as an MTBF
// or as a count observed over a period on a number of units.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trainsim::spec {

// The unit a failure rate counts: every GPU, every node, or the job as a whole (software).
enum class FailureUnit { Gpu, Node, Job };

struct FailureCause {
  std::string cause;  // "faulty GPU"
  FailureUnit per = FailureUnit::Gpu;
  double rate_per_unit_hour = 0;  // failures per unit and hour
  // Whether the failure takes a node out (a spare replaces it, or the job waits for its repair)
  // or only the job (a software fault: restart in place).
  bool replaces_node = true;
};

struct CheckpointSpec {
  double write_bandwidth = 0;       // bytes/s, the storage system's aggregate
  double read_bandwidth = 0;        // bytes/s, aggregate
  double node_write_bandwidth = 0;  // bytes/s per node (its NICs to storage); 0: no limit
  double node_read_bandwidth = 0;
  bool asynchronous = false;         // training stalls only while the state is copied to host memory
  double host_copy_bandwidth = 0;    // bytes/s per GPU, device to host, for asynchronous saves
  std::optional<double> interval_s;  // absent: the Young/Daly optimum
};

struct RestartSpec {
  double detection_s = 0;       // from the failure until the job is known to have stopped
  double rescheduling_s = 0;    // a spare swapped in, the job relaunched
  double initialization_s = 0;  // process groups and NCCL communicators, data loaders
  // the checkpoint's load follows from its size and the read bandwidth
};

struct ReliabilitySpec {
  std::string name;
  std::string source;  // the file it was read from, for errors
  std::vector<FailureCause> causes;
  CheckpointSpec checkpoint;
  RestartSpec restart;
  std::int64_t spare_nodes = 0;
  double repair_s = 0;  // a failed node's time out of the pool
  // The rack's spare-tray policy (NVL72): each scale-up domain the job runs on keeps this many of
  // its hosts (trays) idle as spares, and a failed tray is replaced by one of its own domain's (a
  // tray of another domain cannot join its NVLink fabric). With none left there, the job moves to
  // one of `spare_domains` whole spare domains, or waits for the domain's first tray back. 0: off.
  int spare_trays_per_domain = 0;
  std::int64_t spare_domains = 0;
};

ReliabilitySpec read_reliability_spec(const nlohmann::json& json, const std::string& source);
ReliabilitySpec load_reliability_spec(const std::string& path);
// The shipped default: Llama 3 405B's 54 days on 16,384 H100s (reliability/llama3-405b-table5.json
// beside the topologies).
std::string default_reliability_path();

std::string_view failure_unit_name(FailureUnit unit);

}  // namespace trainsim::spec
