#pragma once
// One accelerator: its datasheet figures and the parameters of the kernel and collective models
// fitted to its microbenchmarks (docs/model.md "Devices"). A topology names a device of the
// catalogue (devices/NAME.json), derives one from it ({"from": NAME, ...overrides}), or describes
// one inline.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/spec/reader.hpp"
#include "trainsim/spec/tunables.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::spec {

enum class Dtype { Fp32, Tf32, Bf16, Fp16, Fp8 };
std::string_view dtype_name(Dtype dtype);
// Bytes per element as stored (fp8: 1, bf16/fp16: 2, fp32/tf32: 4).
int dtype_bytes(Dtype dtype);

// The architecture selects nothing by itself; it names the generation the fitted parameters
// describe and the NCCL tables they come from.
enum class DeviceArch { Unknown, Ampere, Hopper, Blackwell, Cdna3, Cdna4, TpuV4, TpuV5p, TpuV6e, TpuV7 };
std::string_view arch_name(DeviceArch arch);

struct DeviceSpec {
  std::string name;
  DeviceArch arch = DeviceArch::Unknown;
  std::map<Dtype, FlopRate> peak_flops;  // dense tensor-core peak per dtype
  Bytes memory;
  Bandwidth memory_bandwidth;
  int sms = 0;  // streaming multiprocessors (or cores): GEMM wave quantisation
  // Board power the peaks are specified at, and the limit the part runs under when lower (a
  // power-capped part clocks down: docs/model.md "Clocks under a power limit").
  std::optional<double> tdp_w;
  std::optional<double> power_limit_w;
  // Copies between the device and pinned host memory, per direction (activation offloading): the
  // host link's line rate times the share a copy achieves (`host_link`, a catalogue link), or
  // `host_bandwidth` as given. Absent: the device states none.
  std::optional<Bandwidth> host_bandwidth;
  std::string host_link;  // the catalogue link it comes from ("" when given as a figure)
  // FP8 GEMM operand layouts (`fp8_gemm_layouts`): "tn" where an FP8 GEMM takes only transposed-
  // normal operands (Hopper, Ada: Transformer Engine keeps a transposed FP8 copy of each weight and
  // casts each operand to both layouts), "all" where any layout runs (Blackwell: no transpose).
  bool fp8_gemm_all_layouts = false;
  // What moves and reduces a collective's bytes (`collective_engine`): "cores" where the collective
  // library's kernels run on the compute units (NCCL and RCCL: a thread block per channel, so
  // compute beside a collective keeps the others: collectives.channel_sms, kernels.tp_overlap_sms),
  // "dma" where the chip's DMA engines move them over its links (TPU ICI: the matrix units keep
  // running beside a collective, docs/model.md "Collectives beside compute").
  bool collectives_take_cores = true;
  // The kernel and collective parameters fitted to this device's microbenchmarks.
  TunableValues fitted;
  std::string catalogue;  // the catalogue entry it comes from ("" for an inline device)
  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

// Where catalogue entries are looked up: $TRAINSIM_DEVICES (directories separated by ':'), then
// devices/ beside and above the folder of `spec_path` (a topology file), then the devices/ folder
// of the source tree this binary was built from.
std::vector<std::filesystem::path> device_search_path(const std::string& spec_path);
// Catalogue names (file stems) found on the search path, sorted; `subfolder` "links" lists the link
// catalogue instead of the devices.
std::vector<std::string> catalogue_names(const std::string& spec_path, const std::string& subfolder = "");
// The first file NAME.json on the search path (under `subfolder`), or "" when there is none.
std::string catalogue_path(const std::string& name, const std::string& spec_path, const std::string& subfolder = "");

// Reads the `device` value of a topology at `r`'s key "device": a catalogue name, an object
// deriving from one ("from"), or a whole inline device. Problems of a catalogue file are a
// SpecError naming that file. `warnings` receives the defaults assumed.
DeviceSpec read_device_value(Reader& topology, const std::string& spec_path, std::vector<std::string>& warnings);
// A catalogue file on its own (devices/NAME.json).
DeviceSpec load_device_file(const std::string& path);

}  // namespace trainsim::spec
