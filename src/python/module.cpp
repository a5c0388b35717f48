// trainsim._core: the C++ half of `import trainsim` (python/trainsim/ is the typed half). Each
// function takes the inputs the CLI's command takes, calls the same api:: function the CLI calls
// with the GIL released, and hands back the report: its JSON text is the CLI's `--format json`
// output byte for byte. Errors become trainsim.SpecError (bad input) or RuntimeError (a bug).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "trainsim/api/api.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/report/chakra.hpp"
#include "trainsim/report/collective_report.hpp"
#include "trainsim/report/format.hpp"
#include "trainsim/report/goodput_format.hpp"
#include "trainsim/report/perfetto.hpp"
#include "trainsim/report/trace_format.hpp"
#include "trainsim/util/error.hpp"

namespace py = pybind11;

namespace trainsim::python {
namespace {

using report::Format;

// A spec from the Python layer: None, a str (a path, or a strategy's inline list), or a pair
// (JSON text of a dict, how errors name it).
api::SpecInput spec_input(const py::handle& h) {
  if (h.is_none()) return {};
  if (py::isinstance<py::str>(h)) return {.text = h.cast<std::string>()};
  const auto pair = h.cast<py::tuple>();
  const auto text = pair[0].cast<std::string>();
  auto label = pair[1].cast<std::string>();
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw SpecError(label, "", fmt::format("not JSON: {}", e.what()));
  }
  return {.value = std::move(value), .label = std::move(label)};
}

template <typename T>
T get(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

spec::TrainingOverrides training(const py::dict& d) {
  spec::TrainingOverrides o;
  if (d.contains("seq_len") && !d["seq_len"].is_none()) o.seq_len = d["seq_len"].cast<std::int64_t>();
  if (d.contains("global_batch") && !d["global_batch"].is_none())
    o.global_batch = d["global_batch"].cast<std::int64_t>();
  if (d.contains("dtype") && !d["dtype"].is_none()) o.dtype = d["dtype"].cast<std::string>();
  if (d.contains("optimizer") && !d["optimizer"].is_none()) o.optimizer = d["optimizer"].cast<std::string>();
  return o;
}

// A report kept alive on the C++ side, for its renderings and its pages.
struct Run {
  api::RunResult result;
  std::string text(const std::string& format) const {
    return report::render(result.report, format == "json" ? Format::Json : Format::Table);
  }
  bool fits() const { return result.report.fits; }
  void write_html(const std::string& path) const { html::write_page(path, html::run_page(result.report)); }
  void write_timeline(const std::string& path) const {
    if (!result.report.step)
      throw SpecError("timeline", "", "the timeline needs a simulated step; this run was analytic (analytic=False)");
    report::write_perfetto(result.report.step->lowered, result.report.step->timeline, path);
  }
};

struct Sweep {
  search::SweepResult result;
  std::string text(const std::string& format) const {
    return search::render(result, format == "json" ? Format::Json : Format::Table);
  }
  void write_html(const std::string& path) const { html::write_page(path, html::sweep_page(result)); }
};

struct Goodput {
  api::GoodputResult result;
  std::string text(const std::string& format) const {
    return report::render(result.report, format == "json" ? Format::Json : Format::Table);
  }
  bool fits() const { return result.report.fits; }
  void write_html(const std::string& path) const { html::write_page(path, html::goodput_page(result.report)); }
};

struct Replay {
  trace::TraceReport report;
  std::string text(const std::string& format) const {
    return report::render(report, format == "json" ? Format::Json : Format::Table);
  }
  void write_html(const std::string& path) const { html::write_page(path, html::replay_page(report)); }
};

std::unique_ptr<Run> run(const py::dict& d) {
  api::RunRequest r{.topology = spec_input(d["topology"]),
                    .workload = spec_input(d["workload"]),
                    .strategy = spec_input(d["strategy"]),
                    .megatron_args = get<std::string>(d, "megatron_args", ""),
                    .torchtitan = get<std::string>(d, "torchtitan", ""),
                    .training = training(d),
                    .calibration = get<std::string>(d, "calibration", ""),
                    .perturb = get<std::string>(d, "perturb", ""),
                    .steps = get<int>(d, "steps", 1),
                    .memory_headroom = get<double>(d, "memory_headroom", driver::RunOptions::kDefaultMemoryHeadroom),
                    .full = get<bool>(d, "full", false),
                    .analytic = get<bool>(d, "analytic", false)};
  const auto chakra = get<std::string>(d, "chakra", "");
  r.chakra = !chakra.empty();
  py::gil_scoped_release release;
  auto out = std::make_unique<Run>(Run{api::run(r)});
  const auto& report = out->result.report;
  if (!chakra.empty() && report.step)
    report::write_chakra(*out->result.job, report.step->lowered, report.step->timeline, chakra);
  return out;
}

std::unique_ptr<Sweep> sweep(const py::dict& d) {
  api::SweepRequest r{.topology = spec_input(d["topology"]),
                      .workload = spec_input(d["workload"]),
                      .training = training(d),
                      .gpus = get<std::vector<std::int64_t>>(d, "gpus", {}),
                      .fix = get<std::string>(d, "fix", ""),
                      .rank_by = get<std::string>(d, "rank_by", "step_time"),
                      .top = get<std::size_t>(d, "top", 10),
                      .threads = get<unsigned>(d, "threads", 0),
                      .shard = get<std::string>(d, "shard", ""),
                      .calibration = get<std::string>(d, "calibration", ""),
                      .memory_headroom = get<double>(d, "memory_headroom", driver::RunOptions::kDefaultMemoryHeadroom),
                      .exhaustive = get<bool>(d, "exhaustive", false)};
  py::gil_scoped_release release;
  return std::make_unique<Sweep>(Sweep{api::sweep(r)});
}

std::unique_ptr<Sweep> merge(const std::vector<std::string>& files) {
  py::gil_scoped_release release;
  return std::make_unique<Sweep>(Sweep{api::merge_sweeps(files)});
}

std::string collective(const py::dict& d) {
  api::CollectiveRequest r{.topology = spec_input(d["topology"]),
                           .op = get<std::string>(d, "op", ""),
                           .bytes = get<std::string>(d, "bytes", ""),
                           .sweep = get<std::string>(d, "sweep", ""),
                           .group = get<std::string>(d, "group", "all"),
                           .algorithm = get<std::string>(d, "algorithm", "auto"),
                           .strategy = get<std::string>(d, "strategy", ""),
                           .calibration = get<std::string>(d, "calibration", "")};
  py::gil_scoped_release release;
  return report::render(api::collective(r), Format::Json);
}

std::unique_ptr<Goodput> goodput(const py::dict& d) {
  api::GoodputRequest r{.topology = spec_input(d["topology"]),
                        .workload = spec_input(d["workload"]),
                        .strategy = spec_input(d["strategy"]),
                        .training = training(d),
                        .reliability = get<std::string>(d, "reliability", ""),
                        .checkpoint_interval = get<std::string>(d, "checkpoint_interval", ""),
                        .seed = get<std::uint64_t>(d, "seed", 1),
                        .samples = get<int>(d, "samples", 1000)};
  if (d.contains("tokens") && !d["tokens"].is_none()) r.tokens = d["tokens"].cast<double>();
  if (d.contains("days") && !d["days"].is_none()) r.days = d["days"].cast<double>();
  py::gil_scoped_release release;
  return std::make_unique<Goodput>(Goodput{api::goodput(r)});
}

struct ChakraReplay {
  trace::ChakraReport report;
  std::string text(const std::string& format) const {
    return report::render(report, format == "json" ? Format::Json : Format::Table);
  }
};

std::unique_ptr<ChakraReplay> replay_chakra(const py::dict& d) {
  const auto dir = get<std::string>(d, "chakra", "");
  api::ReplayRequest r{.topology = get<std::string>(d, "topology", ""),
                       .calibration = get<std::string>(d, "calibration", ""),
                       .compute_scale = get<double>(d, "compute_scale", 1),
                       .network_scale = get<double>(d, "network_scale", 1),
                       .cost_compute = get<bool>(d, "cost_compute", false)};
  py::gil_scoped_release release;
  return std::make_unique<ChakraReplay>(ChakraReplay{api::replay_chakra(dir, r)});
}

std::unique_ptr<Replay> replay(const py::dict& d) {
  api::ReplayRequest r{.traces = get<std::vector<std::string>>(d, "traces", {}),
                       .topology = get<std::string>(d, "topology", ""),
                       .calibration = get<std::string>(d, "calibration", ""),
                       .compute_scale = get<double>(d, "compute_scale", 1),
                       .network_scale = get<double>(d, "network_scale", 1)};
  py::gil_scoped_release release;
  return std::make_unique<Replay>(Replay{api::replay(r)});
}

std::string calibrate(const std::vector<std::string>& traces, const std::string& topology) {
  py::gil_scoped_release release;
  return report::json_text(report::to_json(api::calibrate(traces, topology), traces)) + "\n";
}

// SpecError → trainsim.SpecError(message, source, diagnostics); IoError likewise (bad input).
void translate(std::exception_ptr p) {
  const auto raise = [](const std::string& message, const std::string& source, const py::list& diagnostics) {
    const auto cls = py::module_::import("trainsim._errors").attr("SpecError");
    PyErr_SetObject(cls.ptr(), cls(message, source, diagnostics).ptr());
  };
  try {
    if (p) std::rethrow_exception(p);
  } catch (const SpecError& e) {
    py::list diagnostics;
    for (const auto& d : e.diagnostics())
      diagnostics.append(py::make_tuple(d.source.empty() ? e.source() : d.source, d.pointer, d.message));
    raise(e.what(), e.source(), diagnostics);
  } catch (const IoError& e) {
    raise(e.what(), "", py::list());
  }
}

}  // namespace
}  // namespace trainsim::python

PYBIND11_MODULE(_core, m) {
  using namespace trainsim::python;
  m.doc() = "trainsim's C++ core; use the `trainsim` package";
  m.attr("version") = TRAINSIM_VERSION;
  py::register_exception_translator(&translate);

  // rendering and writing pages run without the GIL too
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<Run>(m, "Run")
      .def("text", &Run::text, py::arg("format"), release())
      .def_property_readonly("fits", &Run::fits)
      .def("write_html", &Run::write_html, py::arg("path"), release())
      .def("write_timeline", &Run::write_timeline, py::arg("path"), release());
  py::class_<Sweep>(m, "Sweep")
      .def("text", &Sweep::text, py::arg("format"), release())
      .def("write_html", &Sweep::write_html, py::arg("path"), release());
  py::class_<Goodput>(m, "Goodput")
      .def("text", &Goodput::text, py::arg("format"), release())
      .def_property_readonly("fits", &Goodput::fits)
      .def("write_html", &Goodput::write_html, py::arg("path"), release());
  py::class_<Replay>(m, "Replay")
      .def("text", &Replay::text, py::arg("format"), release())
      .def("write_html", &Replay::write_html, py::arg("path"), release());

  py::class_<ChakraReplay>(m, "ChakraReplay").def("text", &ChakraReplay::text, py::arg("format"), release());

  m.def("run", &run, py::arg("request"));
  m.def("replay_chakra", &replay_chakra, py::arg("request"));
  m.def("sweep", &sweep, py::arg("request"));
  m.def("merge", &merge, py::arg("files"));
  m.def("collective", &collective, py::arg("request"));
  m.def("goodput", &goodput, py::arg("request"));
  m.def("replay", &replay, py::arg("request"));
  m.def("calibrate", &calibrate, py::arg("traces"), py::arg("topology"));
}
