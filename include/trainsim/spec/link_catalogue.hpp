#pragma once
// The link catalogue (devices/links/NAME.json, docs/model.md "Link catalogue"): a link generation's
// figures — bandwidth per direction, latency, the share of the line rate the collective library
// achieves on it — cited once, so that a topology names its links ("link": "nvlink4") and inherits
// them. Figures a topology gives override the catalogue's.
#include <optional>
#include <string>
#include <vector>

#include "trainsim/spec/reader.hpp"
#include "trainsim/util/units.hpp"

namespace trainsim::spec {

// Where a link kind can be used: a node's fabric, a leaf/spine network's NICs, a torus.
enum class LinkScope { Fabric, Network, Torus };
std::string_view link_scope_name(LinkScope scope);

struct LinkKind {
  std::string catalogue;  // file stem: "nvlink4"
  std::string name;       // "NVLink 4"
  LinkScope scope = LinkScope::Fabric;
  Bandwidth bandwidth;                    // one link (fabric, torus) or one port (network), per direction
  std::optional<int> links_per_device;    // fabric: the usual count per device (H100: 18)
  Duration latency;                       // fabric: one step; network: NIC to NIC; torus: one hop
  std::optional<Duration> switch_latency; // network: each further switch crossed
  double efficiency = 1.0;                // usable share of the line rate with the collective library
  // torus: the slices a pod of this link can form. The largest slice (dimensions in any order);
  // slices of more than one cube are whole cubes of this side, each dimension wrapping around
  // (TPU v4, v5p: the optical switches close every ring); or only a dimension of this full extent
  // wraps around (v5e, v6e: a 16 x 16 pod's own wraparound links). 0 where the catalogue says nothing.
  std::vector<int> max_slice;
  int cube_side = 0;
  int full_axis = 0;
  friend bool operator==(const LinkKind&, const LinkKind&) = default;
};

// Catalogue link names found on the device search path (devices/links/), sorted.
std::vector<std::string> link_catalogue_names(const std::string& spec_path);
// One catalogue file on its own; problems are a SpecError naming it.
LinkKind load_link_file(const std::string& path);
// Reads `r`'s `key` ("link") when present: a catalogue name whose scope must be `scope`. An unknown
// name or a link of another scope is a diagnostic at the key listing the candidates.
std::optional<LinkKind> read_link_value(Reader& r, LinkScope scope, const std::string& spec_path,
                                        std::string_view key = "link");

}  // namespace trainsim::spec
