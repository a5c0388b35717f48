#pragma once
// The pieces every page is made of: the document with its header figures and sections, and SVG
// charts (stacked bars, Gantt rows, lines, scatters, bars, tables). Colours are CSS classes, so
// the light and dark themes and print restyle them.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::html {

// A number as JSON prints it (shortest round trip), for data attributes a test compares.
std::string number(double value);

class Page {
 public:
  Page(std::string_view kind, std::string_view title, std::string_view subtitle);
  // A headline figure: `key` is the JSON pointer of its number in the command's JSON report.
  void figure(std::string_view key, std::string_view label, std::string_view shown, std::optional<double> value);
  void section(std::string_view id, std::string_view title, std::string_view body);
  std::string finish() const;

 private:
  std::string kind_;
  std::string head_;
  std::string figures_;
  std::string sections_;
};

struct Part {
  std::string label;
  double value = 0;
  std::string css;  // colour class
};
// One horizontal bar of parts, with a legend; `unit` formats the values.
std::string stacked_bar(std::string_view id, const std::vector<Part>& parts, std::string_view unit);

struct Span {
  double start = 0;
  double end = 0;
  std::string css;
  std::string title;  // hover text
};
struct Row {
  std::string label;
  std::vector<Span> spans;
};
// A Gantt chart over [0, end]: one row per entry; with more than `limit` spans in all, spans of a
// row that would fall under one pixel next to a neighbour of the same colour merge (and the chart
// says how many). Rows carry class "gantt-row", spans class "task".
std::string gantt(std::string_view id, const std::vector<Row>& rows, double end, std::size_t limit);

struct Series {
  std::string label;
  std::string css;
  std::vector<std::pair<double, double>> points;  // (x, y)
};
// Lines over a shared x axis, with an optional horizontal limit (dashed).
std::string line_chart(std::string_view id, const std::vector<Series>& series, std::string_view x_unit,
                       std::string_view y_unit, std::optional<double> limit, std::string_view limit_label);

struct Point {
  double x = 0;
  double y = 0;
  std::string css;
  std::string title;
  std::string label;  // drawn beside the point when not empty
  bool highlight = false;
};
// A scatter plot; points carry class "point", highlighted ones also "front".
std::string scatter(std::string_view id, const std::vector<Point>& points, std::string_view x_label,
                    std::string_view y_label, const std::vector<std::pair<std::string, std::string>>& legend);

// Horizontal bars, one per entry (class "bar").
std::string bars(std::string_view id, const std::vector<Part>& parts, std::string_view unit);

// A table of escaped cells.
std::string table(std::string_view id, const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows);

// Seconds in the unit that reads best.
std::string seconds_text(double seconds);

}  // namespace trainsim::html
