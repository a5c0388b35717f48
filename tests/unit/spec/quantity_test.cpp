#include <doctest/doctest.h>

#include "trainsim/spec/quantity.hpp"
#include "trainsim/util/error.hpp"

using namespace trainsim;
using namespace trainsim::spec;

namespace {
double value(std::string_view text, QuantityKind kind) {
  const auto r = parse_quantity(text, kind);
  REQUIRE_MESSAGE(std::holds_alternative<double>(r), std::get<QuantityError>(r).message);
  return std::get<double>(r);
}
std::string error(std::string_view text, QuantityKind kind) {
  const auto r = parse_quantity(text, kind);
  REQUIRE(std::holds_alternative<QuantityError>(r));
  return std::get<QuantityError>(r).message;
}
}  // namespace

TEST_CASE("sizes use decimal GB and binary GiB") {
  CHECK(value("80 GiB", QuantityKind::Bytes) == 80.0 * 1073741824.0);
  CHECK(value("80 GB", QuantityKind::Bytes) == 80e9);
  CHECK(value("1GiB", QuantityKind::Bytes) == 1073741824.0);
  CHECK(value("1.5 KiB", QuantityKind::Bytes) == 1536.0);
  CHECK(value(" 7 B ", QuantityKind::Bytes) == 7.0);
}

TEST_CASE("bandwidths distinguish bits from bytes") {
  CHECK(value("400 Gb/s", QuantityKind::Bandwidth) == 50e9);
  CHECK(value("300 GB/s", QuantityKind::Bandwidth) == 300e9);
  CHECK(value("200 Gbps", QuantityKind::Bandwidth) == 25e9);
}

TEST_CASE("durations and FLOP rates") {
  CHECK(value("2 us", QuantityKind::Duration) == doctest::Approx(2e-6));
  CHECK(value("2 µs", QuantityKind::Duration) == doctest::Approx(2e-6));
  CHECK(value("500 ns", QuantityKind::Duration) == doctest::Approx(5e-7));
  CHECK(value("312 TFLOP/s", QuantityKind::FlopRate) == 312e12);
  CHECK(value("1e3 GFLOP/s", QuantityKind::FlopRate) == 1e12);
  CHECK(value("500 W", QuantityKind::Power) == 500);
  CHECK(value("1.2 kW", QuantityKind::Power) == 1200);
}

TEST_CASE("an unknown unit is an error that lists the accepted ones") {
  CHECK(error("80 GiBs", QuantityKind::Bytes) ==
        "unknown unit \"GiBs\" in \"80 GiBs\"; expected one of: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB");
  CHECK(error("2 fortnights", QuantityKind::Duration).starts_with("unknown unit \"fortnights\""));
  // a bandwidth is not a size
  CHECK(error("300 GB", QuantityKind::Bandwidth).starts_with("unknown unit \"GB\""));
}

TEST_CASE("malformed numbers are errors, never silent zeros") {
  CHECK(error("", QuantityKind::Bytes) ==
        "\"\" does not start with a non-negative number; expected a size such as \"80 GiB\"");
  CHECK(error("-5 GB", QuantityKind::Bytes).starts_with("\"-5 GB\" does not start with a non-negative number"));
  CHECK(error("GB", QuantityKind::Bytes).starts_with("\"GB\" does not start"));
  CHECK(error("nan GB", QuantityKind::Bytes) == "\"nan GB\" is not a finite number");
  CHECK(error("inf", QuantityKind::Bytes) == "\"inf\" is not a finite number");
  CHECK(error("1e400 B", QuantityKind::Bytes) == "\"1e400 B\" is out of range");
  CHECK(error("1e300 PiB", QuantityKind::Bytes) == "\"1e300 PiB\" is out of range");
  CHECK(error("80", QuantityKind::Bytes).starts_with("\"80\" has no unit"));
}

TEST_CASE("command-line sizes name the option in their error") {
  CHECK(parse_bytes_option("1GiB", "--bytes").count == 1073741824);
  CHECK_THROWS_WITH_AS(parse_bytes_option("1 XB", "--bytes"),
                       "--bytes: unknown unit \"XB\" in \"1 XB\"; expected one of: B, KB, MB, GB, TB, PB, KiB, MiB, "
                       "GiB, TiB, PiB",
                       SpecError);
  CHECK_THROWS_WITH_AS(parse_bytes_option("0 B", "--bytes"),
                       "--bytes: 0 B is out of range; expected a size from 1 B to 1 PB", SpecError);
}

TEST_CASE("command-line sizes as nccl-tests writes them: plain bytes, binary K M G T") {
  CHECK(parse_bytes_option("8", "-b").count == 8);
  CHECK(parse_bytes_option("1048576", "-b").count == 1048576);
  CHECK(parse_bytes_option("64K", "-b").count == 65536);
  CHECK(parse_bytes_option("128m", "-b").count == 128 << 20);
  CHECK(parse_bytes_option("8G", "-b").count == std::int64_t{8} << 30);
  CHECK(parse_bytes_option("1T", "-b").count == std::int64_t{1} << 40);
  // the same size either way
  CHECK(parse_bytes_option("8G", "-b") == parse_bytes_option("8GiB", "-b"));
  CHECK_THROWS_WITH_AS(parse_bytes_option("0.5", "-b"), "-b: 0.5 is not a whole number of bytes", SpecError);
}
