// Unit strings ("300 GB/s", "80 GiB", "5 us", "312 TFLOP/s") of every kind, and command-line sizes.
#include "fuzz/fuzz.hpp"
#include "trainsim/spec/quantity.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  const auto input = fuzz::text(data, size);
  for (const auto kind : {spec::QuantityKind::Bytes, spec::QuantityKind::Bandwidth, spec::QuantityKind::Duration,
                          spec::QuantityKind::FlopRate, spec::QuantityKind::Power})
    (void)spec::parse_quantity(input, kind);
  fuzz::expect_clean([&] { (void)spec::parse_bytes_option(input, "--bytes"); });
  return 0;
}
