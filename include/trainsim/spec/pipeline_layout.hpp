#pragma once
// Megatron-Core's custom pipeline layout (--pipeline-model-parallel-layout, the strategy's
// `pipeline_layout`): what each virtual pipeline stage holds, in model order, as a string such as
// "Et|(tt|)*30mL". Stages are split by `|`; `E` is the embedding, `t` a transformer (decoder) layer,
// `m` a multi-token prediction module, `L` the output layer and loss; `x*n` repeats a symbol,
// `(...)*n` a group, commas are cosmetic (Megatron-Core's
// PipelineParallelLayerLayout.parse_str_to_list). docs/cli.md "Strategy" and docs/model.md
// "Pipeline layouts".
#include <string>
#include <vector>

namespace trainsim::spec {

// One virtual stage's contents.
struct LayoutStage {
  bool embedding = false;
  int layers = 0;  // transformer layers
  int mtp = 0;     // multi-token prediction modules
  bool loss = false;
  bool operator==(const LayoutStage&) const = default;
};

struct PipelineLayout {
  std::string text;  // as given
  std::vector<LayoutStage> stages;
  bool operator==(const PipelineLayout& other) const { return stages == other.stages; }
};

// Parses the layout's syntax (not its fit to a model or a pipeline: check_pipeline_layout); throws
// std::invalid_argument saying what is wrong.
PipelineLayout parse_pipeline_layout(const std::string& text);

// Why the layout cannot run `layers` transformer layers and `mtp` modules on pp stages, as
// Megatron-Core validates it (validate_layer_layout) and as trainsim places the embedding and the
// head; "" when it can.
std::string pipeline_layout_error(const PipelineLayout& layout, int pp, int layers, int mtp);

}  // namespace trainsim::spec
