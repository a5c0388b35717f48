// The collective model against published measurements (tests/reference/nccl_allreduce.json).
#include <doctest/doctest.h>

#include <cmath>

#include "common/jobs.hpp"
#include "cost/common.hpp"

using namespace trainsim;
using namespace trainsim::cost;

TEST_CASE("8×A100 all-reduce bus bandwidth follows the measured nccl-tests sweep") {
  // Azure ND A100 v4, NCCL 2.18.5: within 15% from 1 MiB to 8 GiB; smaller sizes within 10%
  // (docs/validation.md lists every error).
  const auto ref = test::load_reference("nccl_allreduce.json")["a100_8gpu_nvswitch_sweep"];
  test::CostFixture f(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  const auto& bytes = ref["bytes"];
  const auto& busbw = ref["busbw_GBps"];
  double worst_large = 0, worst_small = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = bytes[i].get<std::int64_t>();
    const double measured = busbw[i].get<double>();
    const double predicted = f.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 8), Bytes{b});
    const double error = std::abs(predicted / measured - 1);
    CAPTURE(b);
    CAPTURE(predicted);
    CAPTURE(measured);
    if (b >= (1 << 20)) {
      CHECK(error <= 0.15);
      worst_large = std::max(worst_large, error);
    } else {
      CHECK(error <= 0.10);
      worst_small = std::max(worst_small, error);
    }
  }
  MESSAGE("worst error ≥ 1 MiB: " << worst_large * 100 << "%, below: " << worst_small * 100 << "%");
}

TEST_CASE("published bus bandwidth reference points") {
  const auto points = test::load_reference("nccl_allreduce.json")["reference_points"];
  auto measured = [&](std::string_view system) {
    for (const auto& p : points)
      if (p["system"].get<std::string>().starts_with(system)) return p["busbw_GBps"].get<double>();
    FAIL("no reference point " << system);
    return 0.0;
  };
  test::CostFixture a100(spec::load_cluster_spec(test::topology("dgx-a100-superpod")));
  test::CostFixture h100(spec::load_cluster_spec(test::topology("dgx-h100-superpod")));
  const Bytes big = gib(8);
  SUBCASE("H100 NVLS ≈ 480 GB/s") {
    CHECK(h100.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 8), big) ==
          doctest::Approx(measured("H100 8-GPU, NVLink4 + NVLS")).epsilon(0.05));
  }
  SUBCASE("H100 ring ≈ 370 GB/s, also for other operations") {
    const double ref = measured("H100 8-GPU, NVLink4, ring");
    CHECK(h100.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 8), big, "ring") ==
          doctest::Approx(ref).epsilon(0.05));
    CHECK(h100.busbw_GBps(CollectiveKind::AllGather, test::devices(0, 8), big) == doctest::Approx(ref).epsilon(0.05));
  }
  SUBCASE("multi-node DGX A100 all-reduce ≈ 192 GB/s") {
    CHECK(a100.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 32), big) ==
          doctest::Approx(measured("DGX A100, 8x HDR")).epsilon(0.05));
  }
  SUBCASE("one HDR NIC ≈ 24 GB/s, one NDR NIC ≈ 47 GB/s") {
    CHECK(a100.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 3, 8), big) ==
          doctest::Approx(measured("HDR 200 Gb/s")).epsilon(0.05));
    CHECK(h100.busbw_GBps(CollectiveKind::AllReduce, test::devices(0, 3, 8), big) ==
          doctest::Approx(measured("NDR 400 Gb/s")).epsilon(0.05));
  }
}
