#pragma once
// A calibration file (docs/cli.md "Calibration"): fitted values that override the defaults of the
// kernel, collective and memory models (every tunable of spec/tunables.hpp, each optional) and
// collectives measured on real hardware.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/spec/tunables.hpp"

namespace trainsim::spec {

struct CalibrationSpec {
  TunableValues values;
  std::vector<CollectiveFit> fits;
  // Overrides `tunables` with the file's values and appends its fits.
  void apply(Tunables& tunables) const;
};

CalibrationSpec read_calibration_spec(const nlohmann::json& json, const std::string& source);
CalibrationSpec load_calibration_spec(const std::string& path);
// The file `read_calibration_spec` reads back: only the values that are set.
nlohmann::ordered_json calibration_json(const CalibrationSpec& calibration);

}  // namespace trainsim::spec
