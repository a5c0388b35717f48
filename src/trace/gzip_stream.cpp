#include "trace/gzip_stream.hpp"

namespace trainsim::trace {

GzipBuffer::GzipBuffer(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
  if (file_ != nullptr) gzbuffer(file_, 1 << 17);
}

GzipBuffer::~GzipBuffer() {
  if (file_ != nullptr) gzclose(file_);
}

GzipBuffer::int_type GzipBuffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (n < 0) {
    int code = 0;
    set_error(gzerror(file_, &code));
    return traits_type::eof();
  }
  if (n == 0) {
    // gzread reports a stream cut short only through gzerror
    int code = 0;
    const char* message = gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) set_error(message);
    return traits_type::eof();
  }
  consumed_ += n;
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  return traits_type::to_int_type(*gptr());
}

// zlib's messages start with the path, which the error names already
void GzipBuffer::set_error(std::string_view message) {
  if (message.starts_with(path_ + ": ")) message.remove_prefix(path_.size() + 2);
  error_ = message;
}

}  // namespace trainsim::trace
