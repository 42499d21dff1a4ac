// Line charts as inline SVG for report.html: axes with round-numbered ticks, one polyline per
// series (markers when a series has few points), a legend. No script: the page renders anywhere.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace cnn::train {

struct ChartSeries {
  std::string name;
  std::string colour;  // a CSS colour
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y values are left out
  bool dashed = false;
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  bool log_y = false;  // a logarithmic y axis (for the learning rate)
};

// The chart as an <svg> element of width x height pixels; a note instead when no series has a point.
std::string svg_chart(const Chart& chart, int width = 560, int height = 300);

// Round tick values covering [lo, hi] (about `count` of them): steps of 1, 2 or 5 times a power of ten.
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

// Text with &, <, > and " escaped for HTML and SVG, and bytes that are not UTF-8 spelled \xHH.
std::string escape_html(const std::string& text);

// A colour for the k-th series or run, from a fixed palette that stays readable on white.
const char* palette(size_t k);

}  // namespace cnn::train
