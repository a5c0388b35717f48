#include "html/page.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "trainsim/html/html.hpp"
#include "trainsim/util/error.hpp"
#include "trainsim/util/utf8.hpp"

namespace trainsim::html {
namespace {

// Light by default, dark when the reader's system is, plain for print. Chart colours are classes.
constexpr std::string_view kStyle = R"(:root{--bg:#ffffff;--fg:#1d1d1f;--muted:#6e6e73;--line:#d2d2d7;--panel:#f5f5f7;
--fwd:#4e79a7;--bwd:#59a14f;--w:#edc948;--rec:#9c9c9c;--opt:#e15759;--tp:#b07aa1;--cp:#ff9da7;--ep:#9c755f;
--dp:#f28e2b;--pp:#76b7b2;--bub:#e5e5ea;--oth:#bab0ac;--mem:#4e79a7}
@media (prefers-color-scheme:dark){:root{--bg:#1c1c1e;--fg:#f2f2f7;--muted:#a1a1a6;--line:#3a3a3c;--panel:#2c2c2e;
--bub:#3a3a3c}}
body{background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;max-width:1200px}
h1{font-size:22px;margin:0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
.sub,.note{color:var(--muted)}dl{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}
.fig{background:var(--panel);border-radius:8px;padding:8px 12px;min-width:130px}dt{color:var(--muted);font-size:12px}
dd{margin:0;font-size:18px;font-weight:600}svg{display:block;max-width:100%;height:auto}svg text{fill:var(--fg);font-size:11px}
svg .axis{stroke:var(--line)}svg .limit{stroke:var(--opt);stroke-dasharray:6 4;fill:none}
.c-fwd{fill:var(--fwd)}.c-bwd{fill:var(--bwd)}.c-w{fill:var(--w)}.c-rec{fill:var(--rec)}.c-opt{fill:var(--opt)}
.c-tp{fill:var(--tp)}.c-cp{fill:var(--cp)}.c-ep{fill:var(--ep)}.c-dp{fill:var(--dp)}.c-pp{fill:var(--pp)}
.c-bub{fill:var(--bub)}.c-oth{fill:var(--oth)}.l-fwd{stroke:var(--fwd)}.l-bwd{stroke:var(--bwd)}.l-opt{stroke:var(--opt)}
.l-tp{stroke:var(--tp)}.l-dp{stroke:var(--dp)}.l-pp{stroke:var(--pp)}.l-ep{stroke:var(--ep)}.l-w{stroke:var(--w)}
polyline{fill:none;stroke-width:1.5}circle.front{stroke:var(--fg);stroke-width:1.5}
table{border-collapse:collapse;font-size:12px}th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}.legend span{display:inline-block;margin-right:12px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
button{background:var(--panel);color:var(--fg);border:1px solid var(--line);border-radius:4px;margin-right:4px}
@media print{button{display:none}body{margin:0}.fig{border:1px solid #999}})";

// Zoom for wide charts, and a record that the page's script ran without errors (the browser
// test reads both from the DOM).
constexpr std::string_view kScript =
    R"(window.addEventListener('error',function(){document.body.dataset.errors=(+document.body.dataset.errors||0)+1;});
document.querySelectorAll('[data-zoom]').forEach(function(b){b.addEventListener('click',function(){
var s=document.getElementById(b.dataset.zoom);var k=+b.dataset.factor;var w=k?Math.max(100,s.clientWidth*k):s.dataset.width;
s.style.maxWidth='none';s.style.width=(k?w:w)+'px';});});
document.body.dataset.ready='yes';)";

constexpr double kWidth = 1000;  // chart width in SVG units

std::string fmt_value(double v, std::string_view unit) {
  if (unit == "s") return seconds_text(v);
  if (unit == "B") {
    if (v >= 1099511627776.0) return fmt::format("{:.2f} TiB", v / 1099511627776.0);
    if (v >= 1073741824.0) return fmt::format("{:.2f} GiB", v / 1073741824.0);
    return fmt::format("{:.1f} MiB", v / 1048576.0);
  }
  if (unit.empty()) return fmt::format("{:.4g}", v);
  return fmt::format("{:.4g} {}", v, unit);
}

std::string swatch(std::string_view css) {
  return fmt::format(
      "<svg width=\"10\" height=\"10\" class=\"swatch\"><rect width=\"10\" height=\"10\" class=\"{}\"/></svg>", css);
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
      continue;
    }
    if (n == 1) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += (c < 0x20 && c != '\n' && c != '\t') ? ' ' : static_cast<char>(c);
      }
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string number(double value) {
  return fmt::format("{}", value);
}

std::string seconds_text(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.2f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.1f} min", s / 60);
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

Page::Page(std::string_view kind, std::string_view title, std::string_view subtitle) : kind_(kind) {
  head_ = fmt::format("<header><h1>{}</h1><p class=\"sub\">{}</p></header>\n", escape(title), escape(subtitle));
}

void Page::figure(std::string_view key, std::string_view label, std::string_view shown, std::optional<double> value) {
  figures_ += fmt::format("<div class=\"fig\" data-key=\"{}\"{}><dt>{}</dt><dd>{}</dd></div>\n", escape(key),
                          value ? fmt::format(" data-value=\"{}\"", number(*value)) : std::string(), escape(label),
                          escape(shown));
}

void Page::section(std::string_view id, std::string_view title, std::string_view body) {
  sections_ += fmt::format("<section id=\"{}\"><h2>{}</h2>\n{}\n</section>\n", id, escape(title), body);
}

std::string Page::finish() const {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>trainsim {}</title><style>{}</style></head>\n<body data-page=\"{}\">\n{}<dl id=\"figures\">\n{}</dl>\n{}"
      "<p class=\"note\">Written by trainsim; self-contained: nothing on this page is fetched.</p>\n"
      "<script>{}</script>\n</body></html>\n",
      escape(kind_), kStyle, escape(kind_), head_, figures_, sections_, kScript);
}

std::string stacked_bar(std::string_view id, const std::vector<Part>& parts, std::string_view unit) {
  double total = 0;
  for (const auto& p : parts) total += std::max(0.0, p.value);
  std::string svg = fmt::format("<svg id=\"{}\" viewBox=\"0 0 {} 40\" role=\"img\">", id, kWidth);
  std::string legend = "<p class=\"legend\">";
  double x = 0;
  for (const auto& p : parts) {
    const double w = total > 0 ? std::max(0.0, p.value) / total * kWidth : 0;
    const auto text =
        fmt::format("{}: {} ({:.1f}%)", p.label, fmt_value(p.value, unit), total > 0 ? p.value / total * 100 : 0.0);
    svg += fmt::format(
        "<rect class=\"bar {}\" x=\"{:.2f}\" y=\"4\" width=\"{:.2f}\" height=\"32\"><title>{}</title></rect>", p.css, x,
        w, escape(text));
    x += w;
    legend += fmt::format("<span>{}{}</span>", swatch(p.css), escape(text));
  }
  return svg + "</svg>\n" + legend + "</p>";
}

std::string gantt(std::string_view id, const std::vector<Row>& rows, double end, std::size_t limit) {
  constexpr double kLabel = 190;
  constexpr double kRow = 14;
  const double plot = kWidth - kLabel;
  std::size_t total = 0;
  for (const auto& r : rows) total += r.spans.size();
  const bool merge = total > limit;
  const double pixel = end > 0 ? end / plot : 1;  // seconds per SVG unit
  const double height = kRow * static_cast<double>(rows.size()) + 24;
  std::string svg =
      fmt::format("<svg id=\"{}\" viewBox=\"0 0 {} {}\" data-width=\"{}\" role=\"img\">", id, kWidth, height, kWidth);
  std::size_t drawn = 0;
  std::size_t merged = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double y = 4 + kRow * static_cast<double>(i);
    svg += fmt::format("<g class=\"gantt-row\"><text x=\"0\" y=\"{:.1f}\">{}</text>", y + 10, escape(rows[i].label));
    const auto& spans = rows[i].spans;
    for (std::size_t j = 0; j < spans.size();) {
      Span s = spans[j];
      std::size_t k = j + 1;
      if (merge)
        // (a neighbour under half a unit wide is invisible in its own colour: it joins whatever run it is in)
        while (k < spans.size() && (spans[k].css == s.css || spans[k].end - spans[k].start < 0.5 * pixel) &&
               spans[k].start - s.end < pixel && spans[k].end - s.start < 4 * pixel)
          s.end = spans[k++].end;
      if (k - j > 1) {
        s.title = fmt::format("{} tasks merged, {} to {}", k - j, seconds_text(s.start), seconds_text(s.end));
        merged += k - j;
      }
      svg += fmt::format(
          "<rect class=\"task {}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\"><title>{}</title></rect>",
          s.css, kLabel + s.start / pixel, y, std::max(0.3, (s.end - s.start) / pixel), kRow - 3, escape(s.title));
      ++drawn;
      j = k;
    }
    svg += "</g>";
  }
  svg += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", kLabel, kWidth,
                     height - 18, height - 18);
  for (int t = 0; t <= 4; ++t)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", kLabel + plot * t / 4 - (t == 4 ? 40 : 0),
                       height - 4, seconds_text(end * t / 4));
  svg += "</svg>\n";
  std::string note = fmt::format("<p class=\"note\" data-spans=\"{}\" data-drawn=\"{}\">{} rows, {} tasks", rows.size(),
                                 total, rows.size(), total);
  if (merge)
    note += fmt::format("; beyond {} tasks, {} short neighbours of a colour are drawn merged ({} shapes)", limit,
                        merged, drawn);
  note += fmt::format(
      ". <button data-zoom=\"{}\" data-factor=\"2\">zoom in</button><button data-zoom=\"{}\" "
      "data-factor=\"0.5\">zoom out</button><button data-zoom=\"{}\" data-factor=\"0\">fit</button></p>",
      id, id, id);
  return svg + note;
}

std::string line_chart(std::string_view id, const std::vector<Series>& series, std::string_view x_unit,
                       std::string_view y_unit, std::optional<double> limit, std::string_view limit_label) {
  constexpr double kHeight = 260;
  constexpr double kLeft = 70;
  double max_x = 0, max_y = limit.value_or(0);
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  max_y *= 1.05;
  const auto px = [&](double x) { return kLeft + x / max_x * (kWidth - kLeft - 10); };
  const auto py = [&](double y) { return kHeight - 20 - y / max_y * (kHeight - 30); };
  std::string svg = fmt::format("<svg id=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">", id, kWidth, kHeight);
  svg += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>", kLeft, kWidth, kHeight - 20,
                     kHeight - 20);
  for (int t = 0; t <= 4; ++t) {
    svg += fmt::format("<text x=\"2\" y=\"{:.1f}\">{}</text>", py(max_y * t / 4) + 4, fmt_value(max_y * t / 4, y_unit));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", px(max_x * t / 4) - (t == 4 ? 50 : 0), kHeight - 4,
                       fmt_value(max_x * t / 4, x_unit));
  }
  if (limit)
    svg += fmt::format("<line class=\"limit\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"><title>{}</title></line>",
                       kLeft, kWidth, py(*limit), py(*limit), escape(limit_label));
  std::string legend = "<p class=\"legend\">";
  for (const auto& s : series) {
    std::string points;
    for (const auto& [x, y] : s.points) points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg += fmt::format("<polyline class=\"series {}\" points=\"{}\"><title>{}</title></polyline>",
                       fmt::format("l{}", std::string_view(s.css).substr(1)), points, escape(s.label));
    legend += fmt::format("<span>{}{}</span>", swatch(s.css), escape(s.label));
  }
  return svg + "</svg>\n" + legend + "</p>";
}

namespace {

// Round tick values covering [lo, hi]: a step of 1, 2, 2.5 or 5 times a power of ten giving about
// `count` intervals, the first tick at or below lo and the last at or above hi.
std::vector<double> nice_ticks(double lo, double hi, int count) {
  const double raw = std::max(hi - lo, 1e-12) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (const double m : {1.0, 2.0, 2.5, 5.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; ticks.size() < 2 || ticks.back() < hi - 1e-9 * step; t += step)
    ticks.push_back(std::abs(t) < 1e-9 * step ? 0.0 : t);
  return ticks;
}

// A tick's text with the decimals its step needs: seconds, or GiB.
std::string tick_text(double v, double step, std::string_view unit) {
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
  return fmt::format("{:.{}f} {}", v, decimals, unit);
}

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

}  // namespace

std::string scatter(std::string_view id, const std::vector<Point>& points, std::string_view x_label,
                    std::string_view y_label, const std::vector<std::pair<std::string, std::string>>& legend) {
  // plot area: left of it the y ticks, above it the y axis title, below it the x ticks, then the x title
  constexpr double kHeight = 440, kLeft = 76, kRight = 20, kTop = 30, kBottom = 46;
  // at the page's 11px SVG font, wide enough for "#" and digits as browsers draw them (a "#3" is 16 px)
  constexpr double kCharWidth = 8.4, kTextHeight = 13;
  constexpr double kGiB = 1073741824.0;
  double min_x = 1e300, max_x = 0, max_y = 0;
  for (const auto& p : points) {
    min_x = std::min(min_x, p.x);
    max_x = std::max(max_x, p.x);
    max_y = std::max(max_y, p.y);
  }
  if (points.empty()) min_x = 0, max_x = 1, max_y = 1;
  const double span = std::max(max_x - min_x, max_x * 0.05 + 1e-12);
  const auto xt = nice_ticks(std::max(0.0, min_x - span * 0.05), max_x + span * 0.05, 5);
  const auto yt = nice_ticks(0, std::max(max_y / kGiB * 1.05, 1e-9), 5);
  const double lo = xt.front(), hi = xt.back(), top = yt.back() * kGiB;
  const auto px = [&](double x) { return kLeft + (x - lo) / (hi - lo) * (kWidth - kLeft - kRight); };
  const auto py = [&](double y) { return kHeight - kBottom - y / top * (kHeight - kBottom - kTop); };
  std::string svg = fmt::format("<svg id=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">", id, kWidth, kHeight);
  svg += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>", kLeft, kWidth - kRight,
                     kHeight - kBottom, kHeight - kBottom);
  svg += fmt::format(
      "<text class=\"title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
      "<text class=\"title\" x=\"2\" y=\"{}\">{}</text>",
      (kLeft + kWidth - kRight) / 2, kHeight - 6, escape(x_label), kTop - 16, escape(y_label));
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1, xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
  for (const double t : yt)
    svg += fmt::format("<text class=\"tick y\" data-value=\"{}\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                       number(t), kLeft - 6, py(t * kGiB) + 4, tick_text(t, ystep, "GiB"));
  for (const double t : xt)
    svg +=
        fmt::format("<text class=\"tick x\" data-value=\"{}\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    number(t), px(t), kHeight - kBottom + 16, tick_text(t, xstep, "s"));
  // labels where they overlap no other label: right of the point, else left, then below; a label
  // with no free place is left to the point's tooltip
  std::vector<Box> taken;
  std::string labels;
  for (const auto& p : points) {
    svg += fmt::format("<circle class=\"point {}{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\"><title>{}</title></circle>",
                       p.css, p.highlight ? " front" : "", px(p.x), py(p.y), p.highlight ? 5 : 3.5, escape(p.title));
    if (p.label.empty()) continue;
    const double w = kCharWidth * static_cast<double>(p.label.size()), x = px(p.x), y = py(p.y);
    for (const auto& [dx, dy] : {std::pair{7.0, -5.0}, {-7.0 - w, -5.0}, {7.0, 14.0}, {-7.0 - w, 14.0}}) {
      const Box b{x + dx, y + dy - kTextHeight + 2, x + dx + w, y + dy + 2};
      if (b.x0 < kLeft || b.x1 > kWidth || b.y0 < kTop || b.y1 > kHeight - kBottom) continue;
      if (std::any_of(taken.begin(), taken.end(), [&](const Box& o) { return o.overlaps(b); })) continue;
      taken.push_back(b);
      labels += fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", b.x0, y + dy, escape(p.label));
      break;
    }
  }
  std::string legend_html = "<p class=\"legend\">";
  for (const auto& [label, css] : legend) legend_html += fmt::format("<span>{}{}</span>", swatch(css), escape(label));
  return svg + labels + "</svg>\n" + legend_html + "</p>";
}

std::string bars(std::string_view id, const std::vector<Part>& parts, std::string_view unit) {
  constexpr double kLabel = 420;
  constexpr double kRow = 20;
  double max = 0;
  for (const auto& p : parts) max = std::max(max, p.value);
  if (max <= 0) max = 1;
  std::string svg = fmt::format("<svg id=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">", id, kWidth,
                                kRow * static_cast<double>(parts.size()) + 6);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const double y = 3 + kRow * static_cast<double>(i);
    const auto& p = parts[i];
    const double w = p.value / max * (kWidth - kLabel - 90);
    const auto label = p.label.size() > 70 ? p.label.substr(0, 67) + "..." : p.label;
    svg += fmt::format(
        "<text x=\"0\" y=\"{:.1f}\">{}</text><rect class=\"bar {}\" x=\"{}\" y=\"{:.1f}\" width=\"{:.2f}\" "
        "height=\"{}\"><title>{}: {}</title></rect><text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
        y + 13, escape(label), p.css, kLabel, y, w, kRow - 5, escape(p.label), fmt_value(p.value, unit), kLabel + w + 4,
        y + 13, fmt_value(p.value, unit));
  }
  return svg + "</svg>";
}

std::string table(std::string_view id, const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string out = fmt::format("<table id=\"{}\"><thead><tr>", id);
  for (const auto& h : headers) out += fmt::format("<th>{}</th>", escape(h));
  out += "</tr></thead><tbody>";
  for (const auto& r : rows) {
    out += "<tr>";
    for (const auto& c : r) out += fmt::format("<td>{}</td>", escape(c));
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

void write_page(const std::string& path, const std::string& page) {
  std::ofstream out(path, std::ios::binary);
  out << page;
  if (!out) throw IoError(fmt::format("{}: cannot write", path));
}

}  // namespace trainsim::html
