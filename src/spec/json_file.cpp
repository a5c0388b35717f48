// Loading JSON specs: size and depth limits, duplicate keys and syntax errors are bad input.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "trainsim/spec/reader.hpp"

namespace trainsim::spec {
namespace {

constexpr std::size_t kMaxSpecBytes = 64u << 20;
constexpr std::size_t kMaxDepth = 64;

std::string strip_exception_prefix(std::string what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "line 1, column 2: ..."
  if (const auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
  if (what.rfind("parse error at ", 0) == 0) what = what.substr(15);
  if (what.rfind("parse error: ", 0) == 0) what = what.substr(13);
  return what;
}

// A first pass over the text as SAX events: the nesting depth, and duplicate keys reported with their
// JSON pointer (nlohmann::json silently keeps the last of two equal keys; a spec must not). Its own
// pass rather than a callback of the DOM parser: that parser's callback variant scans an object's
// members each time one of its child objects ends, quadratic in the members (1 MB of small objects
// took 25 s); this one and the plain DOM parse are linear.
class StructureCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit StructureCheck(std::string source) : source_(std::move(source)) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    auto& top = frames_.back();
    top.key = k;
    if (!top.keys.insert(top.key).second) throw SpecError(source_, pointer_join(top.pointer, top.key), "duplicate key");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw SpecError(source_, "", fmt::format("invalid JSON at {}", strip_exception_prefix(e.what())));
  }

 private:
  bool value() {
    advance_index();
    return true;
  }
  bool open(bool array) {
    if (frames_.size() >= kMaxDepth)
      throw SpecError(source_, current_pointer(), fmt::format("invalid JSON: nested deeper than {} levels", kMaxDepth));
    frames_.push_back({array, current_pointer_for_child(), {}, {}, 0});
    return true;
  }
  bool close() {
    frames_.pop_back();
    advance_index();
    return true;
  }

  struct Frame {
    bool is_array;
    std::string pointer;
    std::string key;
    std::set<std::string> keys;
    std::size_t index;
  };

  std::string current_pointer() const { return frames_.empty() ? "" : frames_.back().pointer; }
  std::string current_pointer_for_child() const {
    if (frames_.empty()) return "";
    const auto& top = frames_.back();
    return pointer_join(top.pointer, top.is_array ? std::to_string(top.index) : top.key);
  }
  void advance_index() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  }

  std::string source_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw SpecError(source, "", "file is empty; expected a JSON object");
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw SpecError(source, "", fmt::format("not a JSON text: NUL byte at offset {}", nul));
  StructureCheck check(source);
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &check);
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(source, "", fmt::format("invalid JSON: {}", strip_exception_prefix(e.what())));
  }
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw IoError(fmt::format("{}: cannot read: not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) throw IoError(fmt::format("{}: cannot read: not a regular file", path));
  if (static_cast<std::size_t>(size) > kMaxSpecBytes)
    throw SpecError(path, "",
                    fmt::format("file is {} bytes; a spec may be at most {} MiB", static_cast<long long>(size),
                                kMaxSpecBytes >> 20));
  in.seekg(0);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in.read(text.data(), size)) throw IoError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  return text;
}

nlohmann::json load_json_file(const std::string& path) {
  return parse_json_text(read_text_file(path), path);
}

}  // namespace trainsim::spec
