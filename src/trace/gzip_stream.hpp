#pragma once
// A stream buffer over a gzip (or, transparently, plain) file, read through zlib. Private to trace/.
#include <zlib.h>

#include <array>
#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>

namespace trainsim::trace {

// zlib reads gzip and, transparently, plain files.
class GzipBuffer : public std::streambuf {
 public:
  explicit GzipBuffer(const std::string& path);
  ~GzipBuffer() override;
  GzipBuffer(const GzipBuffer&) = delete;
  GzipBuffer& operator=(const GzipBuffer&) = delete;
  bool is_open() const { return file_ != nullptr; }
  // A zlib error (a truncated or corrupt gzip stream), or "" when the stream ended cleanly.
  const std::string& error() const { return error_; }
  std::int64_t consumed() const { return consumed_; }

 protected:
  int_type underflow() override;

 private:
  // zlib's messages start with the path, which the error names already
  void set_error(std::string_view message);

  std::string path_;
  gzFile file_;
  std::array<char, 1 << 16> buffer_{};
  std::string error_;
  std::int64_t consumed_ = 0;
};

}  // namespace trainsim::trace
