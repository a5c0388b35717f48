#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/report.hpp"

using namespace trainsim;
using namespace trainsim::report;

TEST_CASE("the JSON report carries the INTERFACE.md fields") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b", "tp=8,pp=8,gpus=1024,sp=on,recompute=selective");
  const auto j = to_json(build_run_report(job));
  for (const auto* key :
       {"params_total", "params_per_gpu", "gpus", "peak_memory_bytes", "fits", "memory", "per_stage", "warnings"})
    CHECK(j.contains(key));
  for (const auto* key : {"params", "grads", "optimizer", "activations", "buffers"}) CHECK(j["memory"].contains(key));
  CHECK(j["gpus"] == 1024);
  CHECK(j["per_stage"].size() == 8);
  const auto m = j["memory"];
  CHECK(j["peak_memory_bytes"].get<std::int64_t>() ==
        m["params"].get<std::int64_t>() + m["grads"].get<std::int64_t>() + m["optimizer"].get<std::int64_t>() +
            m["activations"].get<std::int64_t>() + m["buffers"].get<std::int64_t>());
}

TEST_CASE("the same inputs give the same bytes") {
  const auto job = test::make_job("dgx-h100-superpod", "llama3-70b", "tp=8,pp=4,gpus=512,sp=on,recompute=selective");
  const auto a = render(build_run_report(job), Format::Json);
  const auto b = render(build_run_report(job), Format::Json);
  CHECK(a == b);
}

TEST_CASE("sizes print in binary units") {
  CHECK(human_bytes(gib(80)) == "80.00 GiB");
  CHECK(human_bytes(mib(3)) == "3.00 MiB");
  CHECK(human_bytes(Bytes{12}) == "12 B");
  CHECK(human_count(174.6e9) == "174.60 B");
}
