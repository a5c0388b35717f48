#include "trainsim/spec/pipeline_layout.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace trainsim::spec {

namespace {

constexpr std::size_t kMaxExpanded = 1 << 20;  // symbols after the repetitions are unrolled
constexpr int kMaxRepeat = 100000;

// The repeat count at text[at...] (Python's \d+), or -1 when no digit is there; `end` is set past
// it.
int repeat_count(std::string_view text, std::size_t at, std::size_t& end) {
  end = at;
  long long n = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) != 0) {
    n = std::min<long long>(n * 10 + (text[end] - '0'), kMaxRepeat + 1LL);
    ++end;
  }
  if (end == at) return -1;
  if (n > kMaxRepeat) throw std::invalid_argument(fmt::format("a repeat count above {}", kMaxRepeat));
  return static_cast<int>(n);
}

void append_repeated(std::string& out, std::string_view part, int n) {
  if (out.size() + part.size() * static_cast<std::size_t>(n) > kMaxExpanded)
    throw std::invalid_argument(fmt::format("more than {} symbols once its repetitions are unrolled", kMaxExpanded));
  for (int i = 0; i < n; ++i) out.append(part);
}

// Megatron's first pattern, \(([^)]+)\)\*(\d+): a group up to the first `)` and its count, each
// match replaced, left to right.
std::string unroll_groups(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '(') {
      const auto close = text.find(')', i + 1);
      std::size_t end = 0;
      if (close != std::string_view::npos && close > i + 1 && close + 1 < text.size() && text[close + 1] == '*') {
        if (const int n = repeat_count(text, close + 2, end); n >= 0) {
          append_repeated(out, text.substr(i + 1, close - i - 1), n);
          i = end;
          continue;
        }
      }
    }
    append_repeated(out, text.substr(i, 1), 1);
    ++i;
  }
  return out;
}

// Megatron's second pattern, (.)\*(\d+): a symbol and its count.
std::string unroll_symbols(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = 0;
    if (i + 1 < text.size() && text[i + 1] == '*' && text[i] != '\n') {
      if (const int n = repeat_count(text, i + 2, end); n >= 0) {
        append_repeated(out, text.substr(i, 1), n);
        i = end;
        continue;
      }
    }
    append_repeated(out, text.substr(i, 1), 1);
    ++i;
  }
  return out;
}

}  // namespace

PipelineLayout parse_pipeline_layout(const std::string& text) {
  std::string compact;
  std::copy_if(text.begin(), text.end(), std::back_inserter(compact), [](char c) { return c != ','; });
  const std::string symbols = unroll_symbols(unroll_groups(compact));
  PipelineLayout layout{.text = text, .stages = {LayoutStage{}}};
  // the order Megatron-Core checks on the flattened layout: the embedding first, the loss last,
  // each once, no transformer layer after a module
  std::string order;
  for (const char c : symbols) {
    auto& stage = layout.stages.back();
    switch (c) {
      case '|':
        layout.stages.emplace_back();
        continue;
      case 'E':
        stage.embedding = true;
        break;
      case 't':
        ++stage.layers;
        break;
      case 'm':
        ++stage.mtp;
        break;
      case 'L':
        stage.loss = true;
        break;
      default:
        throw std::invalid_argument(fmt::format(
            "'{}' is not a layer symbol (E embedding, t transformer layer, m multi-token prediction module, L loss; "
            "| between stages, x*n and (...)*n repeat, commas are ignored)",
            c));
    }
    order.push_back(c);
  }
  const auto count = [&](char c) { return std::count(order.begin(), order.end(), c); };
  if (count('E') != 1 || order.front() != 'E') throw std::invalid_argument("the embedding E must come first, once");
  if (count('L') != 1 || order.back() != 'L') throw std::invalid_argument("the loss L must come last, once");
  if (const auto m = order.find('m'); m != std::string::npos && order.find('t', m) != std::string::npos)
    throw std::invalid_argument("every transformer layer t must come before the multi-token prediction modules m");
  return layout;
}

std::string pipeline_layout_error(const PipelineLayout& layout, int pp, int layers, int mtp) {
  const auto& stages = layout.stages;
  const auto n = static_cast<int>(stages.size());
  if (pp < 1 || n % pp != 0)
    return fmt::format("{} virtual stages, which pp = {} does not divide (the layout gives pp·vpp stages)", n, pp);
  const int t = std::accumulate(stages.begin(), stages.end(), 0, [](int a, const auto& s) { return a + s.layers; });
  if (t != layers) return fmt::format("{} transformer layer{} t, but the model has {}", t, t == 1 ? "" : "s", layers);
  const int m = std::accumulate(stages.begin(), stages.end(), 0, [](int a, const auto& s) { return a + s.mtp; });
  if (m != mtp)
    return fmt::format("{} multi-token prediction module{} m, but the model has {}", m, m == 1 ? "" : "s", mtp);
  if (!stages.front().embedding)
    return "the embedding E must be in the first virtual stage (trainsim runs no stage before it)";
  if (!stages.back().loss) return "the loss L must be in the last virtual stage (trainsim runs no stage after it)";
  if (mtp > 0 && stages.back().mtp != mtp)
    return "the multi-token prediction modules m must be in the last virtual stage, beside the loss L (a stage of "
           "their own, Megatron-Core's standalone layout, is not modelled)";
  for (int v = 0; v < n; ++v) {
    const auto& s = stages[static_cast<std::size_t>(v)];
    if (!s.embedding && s.layers == 0 && s.mtp == 0 && !s.loss)
      return fmt::format(
          "virtual stage {} is empty (not modelled: give every stage a layer, the embedding or the "
          "loss)",
          v);
  }
  return "";
}

}  // namespace trainsim::spec
