// ZeRO-3 as DeepSpeed runs it (docs/model.md "DeepSpeed's stage 3"). 0.3: one all-gather per
// parameter tensor of at least the persistence threshold, after a device synchronize, through
// torch.distributed's tensor lists; one reduce-scatter per tensor. Since 0.4: one coalesced
// all-gather per module.
#include <doctest/doctest.h>

#include <string>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"

using namespace trainsim;

namespace deepspeed_test {

// Megatron's 7.5B (36 layers, h 4096, GeLU with biases, LayerNorm, learned positions, tied
// embeddings) on 16 A100s, one micro-batch per step.
spec::Job ds_job(const std::string& keys, const std::string& framework = "deepspeed-2021") {
  auto w = spec::load_workload_spec(test::workload("megatron2021-7.5b"));
  w.training.global_batch = 16;
  return test::make_job("dgx-a100-superpod", w, "framework=" + framework + ",zero=3,gpus=16,mb=1," + keys);
}

struct Rank0 {
  driver::RunReport r;
  const sim::TaskGraph& g() const { return r.step->lowered.graph; }
  std::vector<sim::TaskId> tasks(lower::StreamKind kind) const {
    const auto s = r.step->lowered.ranks.front().streams[static_cast<std::size_t>(kind)];
    const auto& t = g().stream_tasks(s);
    return {t.begin(), t.end()};
  }
  int count(lower::StreamKind kind, std::string_view prefix) const {
    int n = 0;
    for (const auto t : tasks(kind)) n += g().name(t).starts_with(prefix) ? 1 : 0;
    return n;
  }
  double busy(lower::StreamKind kind) const {
    double s = 0;
    for (const auto t : tasks(kind)) {
      const auto& span = r.step->timeline.tasks[t.index()];
      s += (span.end - span.start).seconds();
    }
    return s;
  }
};

// How many times a ZeRO-3 gather and a compute task of rank 0 overlap in time.
int overlaps(const Rank0& r) {
  int n = 0;
  const auto compute = r.tasks(lower::StreamKind::Compute);
  for (const auto t : r.tasks(lower::StreamKind::DpComm)) {
    if (!r.g().name(t).starts_with("zero3 gather")) continue;
    const auto& a = r.r.step->timeline.tasks[t.index()];
    for (const auto c : compute) {
      const auto& b = r.r.step->timeline.tasks[c.index()];
      if (a.start < b.end && b.start < a.end) ++n;
    }
  }
  return n;
}

Rank0 ds_run(const spec::Job& j, double eager = -1) {
  driver::RunOptions o;
  if (eager >= 0) {
    o.overrides.set("host", "eager_launch", eager);
    o.overrides.set("host", "collective_launch", 0);
  }
  return {driver::build_run_report(j, o)};
}

// Each layer's four weights (QKV 3h², out_proj h², fc1 and fc2 4h²) have at least 1e5 elements; its
// biases (at most 4h = 16,384) and its LayerNorms' 2 × 4,096 do not. The embedding unit gathers the
// word (51,200 × h) and position (2,048 × h) embeddings; the head (the final LayerNorm, the tied
// embedding unused on one stage) gathers nothing.
constexpr int kLayers = 36;
constexpr int kGathersPerPass = kLayers * 4 + 2;
// every tensor's gradient is reduced: 12 per layer, the two embeddings, the final norm's two
constexpr int kReductions = kLayers * 12 + 2 + 2;

}  // namespace deepspeed_test
using namespace deepspeed_test;

TEST_CASE("DeepSpeed 0.3 gathers each parameter tensor above the persistence threshold once per use") {
  const auto plain = ds_run(ds_job("recompute=none"));
  CHECK(plain.count(lower::StreamKind::DpComm, "zero3 gather F") == kGathersPerPass);
  CHECK(plain.count(lower::StreamKind::DpComm, "zero3 gather B") == kGathersPerPass);
  CHECK(plain.count(lower::StreamKind::DpComm, "grad reduce-scatter") == kReductions);
  // full recomputation: a module's parameters are kept from its recomputation to its backward when
  // fewer than stage3_max_reuse_distance elements are gathered in between, those of the modules
  // after it in the layer. A layer holds 12h² = 201M elements, under the default 1e9: none is
  // gathered again
  const auto full = ds_run(ds_job("recompute=full"));
  CHECK(full.count(lower::StreamKind::DpComm, "zero3 gather B") == kGathersPerPass);
  // at 0 every one is (the embedding is not recomputed)
  const auto none = ds_run(ds_job("recompute=full,zero3_max_reuse_distance=0"));
  CHECK(none.count(lower::StreamKind::DpComm, "zero3 gather B") == 2 * kGathersPerPass - 2);
  // at 1e8: fc2 (nothing after it) and fc1 (fc2's 4h² = 67M after it) are kept; out_proj (8h² =
  // 134M after it) and QKV are gathered again
  const auto some = ds_run(ds_job("recompute=full,zero3_max_reuse_distance=100000000"));
  CHECK(some.count(lower::StreamKind::DpComm, "zero3 gather B") == kGathersPerPass + 2 * kLayers);
  // without the threshold the biases and norms are gathered too: all 12 tensors of a layer, the
  // head's final norm (the embeddings as before)
  const auto all = ds_run(ds_job("recompute=none,zero3_persistence_threshold=0"));
  CHECK(all.count(lower::StreamKind::DpComm, "zero3 gather F") == kLayers * 12 + 2 + 2);
  // PyTorch FSDP's way: one gather per unit
  const auto unit = ds_run(ds_job("recompute=none,zero3_gather=unit,zero3_persistence_threshold=0"));
  CHECK(unit.count(lower::StreamKind::DpComm, "zero3 gather F") == kLayers + 2);
}

TEST_CASE("synchronous gathers never overlap compute; asynchronous ones do") {
  CHECK(overlaps(ds_run(ds_job("recompute=none"))) == 0);
  CHECK(overlaps(ds_run(ds_job("recompute=none,zero3_sync=off"))) > kLayers);  // not by accident
}

TEST_CASE("tensor-list collectives cost the host one eager copy per rank of the group, per collective") {
  const double eager = 10e-6;
  const auto lists = ds_run(ds_job("recompute=none"), eager);
  const auto flat = ds_run(ds_job("recompute=none,zero3_list_io=off"), eager);
  // 2 × 146 gathers and 436 reduce-scatters over the 16 ranks ZeRO shards over
  const double expected = (2 * kGathersPerPass + kReductions) * 16 * eager;
  CHECK(lists.busy(lower::StreamKind::Host) - flat.busy(lower::StreamKind::Host) ==
        doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("DeepSpeed since 0.4 gathers each module's tensors in one collective, asynchronously") {
  // a layer's six modules (two LayerNorms, QKV, out_proj, fc1, fc2; a linear's weight and bias
  // together), the word and position embeddings, the final LayerNorm
  const auto all = ds_run(ds_job("recompute=none,zero3_persistence_threshold=0", "deepspeed"));
  CHECK(all.count(lower::StreamKind::DpComm, "zero3 gather F") == kLayers * 6 + 2 + 1);
  // the default threshold leaves the LayerNorms whole: the four linear layers of each layer
  const auto preset = ds_run(ds_job("recompute=none", "deepspeed"));
  CHECK(preset.count(lower::StreamKind::DpComm, "zero3 gather F") == kGathersPerPass);
  // the gradients reduced unit by unit: the embedding, the layers, the head
  CHECK(preset.count(lower::StreamKind::DpComm, "grad reduce-scatter") == kLayers + 2);
  // not synchronous: the gathers run beside compute
  CHECK(overlaps(preset) > kLayers);
}

TEST_CASE("a unit left with nothing to gather gathers nothing") {
  // the head of a model with tied embeddings on one stage holds only the final LayerNorm, under
  // the persistence threshold; the same with the whole unit gathered at once
  const auto unit = ds_run(ds_job("recompute=none,zero3_gather=unit,zero3_sync=off,zero3_list_io=off", "deepspeed"));
  CHECK(unit.count(lower::StreamKind::DpComm, "zero3 gather F-2") == 0);
  CHECK(unit.count(lower::StreamKind::DpComm, "zero3 gather F") == kLayers + 1);
}

TEST_CASE("an MoE layer's list copies run over each tensor's own group: 16 ranks dense, 2 for the experts") {
  // Mixtral 8x7B on 16 GPUs with EP 8: the dense tensors shard over all 16 ranks, an expert's over
  // the 2 holding it. Per layer, above 1e5 elements: QKV and out_proj (dense), the local expert's
  // fc1 and fc2; under it the two RMSNorms and the router (4,096 × 8). The embedding and the
  // untied output layer are dense; the final norm is not gathered.
  auto w = spec::load_workload_spec(test::workload("mixtral-8x7b"));
  w.training.global_batch = 16;
  const auto job = [&](const std::string& io) {
    return test::make_job("dgx-h100-superpod", w,
                          "framework=deepspeed-2021,zero=3,ep=8,gpus=16,mb=1,recompute=none,zero3_list_io=" + io);
  };
  const double eager = 10e-6;
  const auto lists = ds_run(job("on"), eager);
  const auto flat = ds_run(job("off"), eager);
  const int layers = w.model.layers;
  const int gathered = layers * (2 * 16 + 2 * 2) + 16 + 16;  // per pass
  // every tensor's gradient: per layer five dense (two norms, QKV, out_proj, router) and the
  // expert's two; the embedding, the final norm and the output layer
  const int reduced = layers * (5 * 16 + 2 * 2) + 3 * 16;
  CHECK(lists.busy(lower::StreamKind::Host) - flat.busy(lower::StreamKind::Host) ==
        doctest::Approx((2 * gathered + reduced) * eager).epsilon(1e-6));
}
