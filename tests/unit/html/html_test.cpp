// The HTML pages without a browser: escaping, self-containment, determinism, the Gantt's limit.
// tests/html/check_pages.py opens them in headless Chromium.
#include <doctest/doctest.h>

#include "common/jobs.hpp"
#include "trainsim/driver/run.hpp"
#include "trainsim/html/html.hpp"
#include "trainsim/trace/analysis.hpp"

using namespace trainsim;

namespace html_test {

TEST_CASE("escaping: markup, quotes and ampersands as text; invalid UTF-8 replaced") {
  CHECK(html::escape("<script>a & \"b\" 'c'</script>") ==
        "&lt;script&gt;a &amp; &quot;b&quot; &#39;c&#39;&lt;/script&gt;");
  CHECK(html::escape("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82") == "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82");
  CHECK(html::escape("a\xff" "b") == "a\xef\xbf\xbd" "b");          // a stray byte
  CHECK(html::escape("\xc3") == "\xef\xbf\xbd");                     // a sequence cut short
  CHECK(html::escape("\xe2\x28\xa1") == "\xef\xbf\xbd(\xef\xbf\xbd");  // a bad continuation
  // not well-formed by Unicode's table 3-7: an overlong '/' and an encoded surrogate (U+D800), each
  // byte replaced
  CHECK(html::escape("\xc0\xaf") == "\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(html::escape("\xed\xa0\x80") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_CASE("a run's page: self-contained, the same bytes for the same inputs, big steps merged") {
  const auto job = test::make_job("dgx-a100-superpod", "gpt3-175b",
                                  "tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3");
  const auto a = html::run_page(driver::build_run_report(job));
  const auto b = html::run_page(driver::build_run_report(job));
  CHECK(a == b);
  // nothing fetched: no external source, link or import
  for (const auto* needle : {"src=\"http", "href=\"http", "@import", "url(", "<link", "<iframe"})
    CHECK(a.find(needle) == std::string::npos);
  CHECK(a.find("<script>") != std::string::npos);
  // 175,796 tasks: beyond the limit the chart says it merged
  CHECK(a.find("drawn merged") != std::string::npos);
  CHECK(a.size() < 3u * 1024 * 1024);
}

// A replay of traces recorded with profile_memory=True draws the caching allocator's peak of each
// step and, given the job, sets the model's peaks beside the recorded ones.
TEST_CASE("a replay's page draws the recorded memory peaks per step and the model's beside them") {
  trace::TraceReport r;
  for (int step = 1; step <= 3; ++step)
    r.steps.push_back({.rank = 0,
                       .step = step,
                       .recorded_s = 1.0,
                       .replayed_s = 1.0,
                       .peak_allocated = std::int64_t{50} << 30,
                       .peak_reserved = std::int64_t{60} << 30});
  const auto plain = html::replay_page(r);
  CHECK(plain.find("memory-steps") != std::string::npos);
  CHECK(plain.find("memory-table") == std::string::npos);  // no job, no model to compare
  r.memory = trace::MemoryComparison{.recorded_allocated = std::int64_t{50} << 30,
                                     .recorded_reserved = std::int64_t{60} << 30,
                                     .model_live = std::int64_t{45} << 30,
                                     .model_reserved = std::int64_t{63} << 30};
  const auto compared = html::replay_page(r);
  CHECK(compared.find("memory-table") != std::string::npos);
  CHECK(compared.find("id=\"memory\"") != std::string::npos);
  CHECK(compared.find("-10.0%") != std::string::npos);  // 45 against 50 GiB
  CHECK(compared.find("+5.0%") != std::string::npos);   // 63 against 60 GiB
  CHECK(compared.find("the model&#39;s live peak") != std::string::npos);
  // traces without memory events: no memory section
  for (auto& s : r.steps) s.peak_allocated = s.peak_reserved = std::nullopt;
  r.memory.reset();
  CHECK(html::replay_page(r).find("id=\"memory\"") == std::string::npos);
}

}  // namespace html_test
