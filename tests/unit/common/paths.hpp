#pragma once
// Paths of shipped specs and reference data, and scratch directories, for tests.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace trainsim::test {

inline std::string source_path(const std::string& relative) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/" + relative;
}
inline std::string topology(const std::string& name) {
  return source_path("topologies/" + name + ".json");
}
inline std::string workload(const std::string& name) {
  return source_path("workloads/" + name + ".json");
}
inline std::string reference(const std::string& name) {
  return std::string(TRAINSIM_REFERENCE_DIR) + "/" + name;
}

// Every JSON file of a shipped folder ("topologies", "workloads", "devices"), sorted.
inline std::vector<std::string> shipped(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(source_path(folder)))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A fresh directory under the system's temporary directory, removed with everything in it when
// the object goes: tests never write into the source tree, and two runs never share files.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a scratch directory");
    path_ = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace trainsim::test
