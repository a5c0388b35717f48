// Multi-token prediction modules (model.mtp_layers): their FLOPs against the Megatron closed form,
// their parameters on the last pipeline stage, and what they add to a simulated step.
#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "lower/data_parallel.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/model/flops.hpp"
#include "trainsim/model/params.hpp"

using namespace trainsim;

namespace {

spec::WorkloadSpec gpt(int mtp_layers) {
  auto w = spec::load_workload_spec(test::workload("megatron2020-8b"));
  w.model.mtp_layers = mtp_layers;
  return w;
}

}  // namespace

TEST_CASE("a multi-token prediction module adds one layer, its projection and the output layer again") {
  // Megatron's closed form per layer, 72·B·s·h²(1 + s/6h), and for the logits 72·B·s·h²·V/12h
  // (6·B·s·V·h), plus the projection of [hidden; embedding] to hidden, 6·B·s·2h·h
  for (const int modules : {1, 2}) {
    CAPTURE(modules);
    const auto base = gpt(0);
    const auto job = test::make_job("dgx-a100-superpod", gpt(modules), "gpus=1");
    const auto plain = test::make_job("dgx-a100-superpod", base, "gpus=1");
    const double B = static_cast<double>(base.training.global_batch);
    const double s = static_cast<double>(base.training.seq_len);
    const double h = static_cast<double>(base.model.hidden);
    const double V = static_cast<double>(base.model.vocab);
    const double module = 72 * B * s * h * h * (1 + s / (6 * h) + V / (12 * h)) + 6 * B * s * 2 * h * h;
    CHECK(model::step_flops(job).model - model::step_flops(plain).model ==
          doctest::Approx(modules * module).epsilon(1e-12));
    CHECK(model::step_flops(job).model ==
          doctest::Approx(model::megatron_formula_flops(base, false) + modules * module).epsilon(1e-12));
  }
}

TEST_CASE("the modules sit on the last pipeline stage: a layer and 2h²/tp + 3 norms more there, nothing elsewhere") {
  const auto with = test::make_job("dgx-a100-superpod", gpt(1), "tp=2,pp=2,gpus=4");
  const auto without = test::make_job("dgx-a100-superpod", gpt(0), "tp=2,pp=2,gpus=4");
  const auto a = model::stage_params(with);
  const auto b = model::stage_params(without);
  REQUIRE(a.size() == 2);
  for (std::size_t s = 0; s + 1 < a.size(); ++s) CHECK(a[s].total() == b[s].total());
  const double h = static_cast<double>(with.workload.model.hidden);
  const double layer = model::layer_params_on_gpu(with.workload.model, false, 2, 1, 1).total();
  const double norms = 3 * 2 * h;  // LayerNorm: a weight and a bias of h each
  CHECK(a[1].total() - b[1].total() == doctest::Approx(layer + 2 * h * h / 2 + norms).epsilon(1e-12));
  // the whole model: one layer and the projection and norms, undivided
  const auto counts = model::count_params(with.workload.model, with.workload.training.seq_len);
  CHECK(counts.mtp() == doctest::Approx(counts.dense_layer.total() + 2 * h * h + norms).epsilon(1e-12));
}

TEST_CASE("a module lengthens the last stage: a longer step, a larger bubble, more memory there") {
  driver::RunOptions options;
  const auto with = driver::build_run_report(test::make_job("dgx-a100-superpod", gpt(1), "tp=8,pp=2,gpus=16"), options);
  const auto without =
      driver::build_run_report(test::make_job("dgx-a100-superpod", gpt(0), "tp=8,pp=2,gpus=16"), options);
  REQUIRE(with.simulation);
  REQUIRE(without.simulation);
  // the last stage's extra layer and head run once per micro-batch: the other stages wait for it
  CHECK(with.simulation->step_time_s > without.simulation->step_time_s);
  CHECK(with.simulation->bubble_fraction > without.simulation->bubble_fraction);
  // the last stage holds the module's layer and its tensors, analytic and simulated; the first not
  CHECK(with.memory.stages.back().bytes.live() > without.memory.stages.back().bytes.live());
  CHECK(with.memory.stages.front().bytes.live() == without.memory.stages.front().bytes.live());
  CHECK(with.simulation->per_stage.back().peak_memory > without.simulation->per_stage.back().peak_memory);
  // the module's passes are named as its own in the timeline, not as a 43rd layer
  REQUIRE(with.step);
  const auto& g = with.step->lowered.graph;
  bool named = false, numbered = false;
  for (std::size_t t = 0; t < g.num_tasks(); ++t) {
    const auto name = g.name(sim::TaskId{static_cast<std::uint32_t>(t)});
    named = named || name.starts_with("F0 MTP0 ");
    numbered = numbered || name.starts_with("F0 L42 ");
  }
  CHECK(named);
  CHECK_FALSE(numbered);
}

TEST_CASE("beside an untied output layer the last stage also holds a copy of the embedding") {
  // Megatron-Core builds the embedding where the modules are (pre_process or mtp_process)
  auto untied = [](int modules) {
    auto w = gpt(modules);
    w.model.tied_embeddings = false;
    return w;
  };
  const auto with = test::make_job("dgx-a100-superpod", untied(1), "tp=2,pp=2,gpus=4");
  const auto without = test::make_job("dgx-a100-superpod", untied(0), "tp=2,pp=2,gpus=4");
  const auto& m = with.workload.model;
  const double h = static_cast<double>(m.hidden);
  const double layer = model::layer_params_on_gpu(m, false, 2, 1, 1).total();
  const double copy = static_cast<double>((m.vocab + 1) / 2) * h;
  CHECK(model::stage_params(with)[1].total() - model::stage_params(without)[1].total() ==
        doctest::Approx(layer + 2 * h * h / 2 + 3 * 2 * h + copy).epsilon(1e-12));
}

TEST_CASE("a module's layer is recomputed as the lowering numbers it: after its chunk's layers") {
  // recompute_layers=1 recomputes the first layer of each chunk: never the module's, so the
  // recomputed FLOPs are those of the model without it
  const auto with = model::step_flops(
      test::make_job("dgx-a100-superpod", gpt(1), "tp=8,pp=2,gpus=16,recompute=full,recompute_layers=1"));
  const auto without = model::step_flops(
      test::make_job("dgx-a100-superpod", gpt(0), "tp=8,pp=2,gpus=16,recompute=full,recompute_layers=1"));
  CHECK(with.hardware - with.model == doctest::Approx(without.hardware - without.model).epsilon(1e-12));
  // under full recomputation of every layer it is recomputed too
  const auto all = model::step_flops(test::make_job("dgx-a100-superpod", gpt(1), "tp=8,pp=2,gpus=16,recompute=full"));
  CHECK(all.hardware - all.model > with.hardware - with.model);
}

TEST_CASE("Megatron-Bridge's layout puts the module and the loss alone in the last virtual stage") {
  // "Et|(tt|)*30mL" on 8 stages of 4 chunks: stage 0 holds the embedding and 1 + 2 + 2 + 2 layers,
  // stage 7 holds 2 + 2 + 2 layers and then a chunk of the module and the head only
  const auto laid = test::make_job("dgx-h100-superpod", "deepseek-v3-like",
                                   "tp=2,pp=8,ep=64,gpus=1024,pipeline_layout=Et|(tt|)*30mL");
  CHECK(lower::chunk_units(laid, 0, 0) == std::vector<int>{lower::kEmbeddingUnit, 0});
  CHECK(lower::chunk_units(laid, 7, 3) == std::vector<int>{61, lower::kHeadUnit});
  CHECK(lower::chunk_units(laid, 7, 2) == std::vector<int>{45, 46});  // virtual stage 23: after 1 + 22×2
  // the stages hold what the even split of 7 + 6×8 + 6 gives them: only the chunks differ
  const auto split = test::make_job("dgx-h100-superpod", "deepseek-v3-like",
                                    "tp=2,pp=8,vpp=4,schedule=interleaved,ep=64,gpus=1024,first_stage_layers=7,"
                                    "last_stage_layers=6");
  const auto a = model::stage_params(laid);
  const auto b = model::stage_params(split);
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s) CHECK(a[s].total() == b[s].total());
  CHECK(lower::chunk_units(split, 7, 3) == std::vector<int>{60, 61, lower::kHeadUnit});
}
