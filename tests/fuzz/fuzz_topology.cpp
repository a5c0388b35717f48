// Topology specs: any bytes, read as a topology file, then built into the graph when valid.
#include "fuzz/fuzz.hpp"
#include "trainsim/spec/cluster_spec.hpp"
#include "trainsim/spec/reader.hpp"
#include "trainsim/topo/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  fuzz::expect_clean([&] {
    const auto cluster =
        spec::read_cluster_spec(spec::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json");
    // the graph of a valid spec, unless it is beyond what a fuzz iteration should build
    if (cluster.num_devices() <= 4096) (void)topo::Topology::build(cluster);
  });
  return 0;
}
