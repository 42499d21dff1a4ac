// SVG line charts (see svg_chart.h).
#include "train/pictures/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/io/utf8_text.h"

namespace cnn::train {

namespace {

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// A tick label with as many decimals as the tick spacing needs; scientific for very small or
// large values.
std::string tick_label(double v, double spacing) {
  char buffer[32];
  const double a = std::fabs(v);
  if (v == 0) return "0";
  if (a < 1e-3 || a >= 1e7) {
    std::snprintf(buffer, sizeof buffer, "%.2g", v);
  } else {
    const int decimals = spacing > 0 ? std::clamp(static_cast<int>(-std::floor(std::log10(spacing) + 1e-9)), 0, 6) : 2;
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  }
  return buffer;
}

// Ticks of a logarithmic axis over [lo, hi] (in log10 units): 1, 2 and 5 times powers of ten inside
// it, or the linear ticks of the values when fewer than two of those fall inside.
std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  for (int e = static_cast<int>(std::floor(lo)); e <= static_cast<int>(std::ceil(hi)); ++e)
    for (const double m : {1.0, 2.0, 5.0}) {
      const double t = std::log10(m) + e;
      if (t >= lo && t <= hi) ticks.push_back(t);
    }
  if (ticks.size() >= 2) return ticks;
  ticks.clear();
  for (const double v : nice_ticks(std::pow(10.0, lo), std::pow(10.0, hi), 4))
    if (v > 0) ticks.push_back(std::log10(v));
  return ticks;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  for (const char c : io::printable_utf8(text)) {  // the page says it is UTF-8: names may be other bytes
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* palette(size_t k) {
  static const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return colours[k % (sizeof colours / sizeof colours[0])];
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string svg_chart(const Chart& chart, int width, int height) {
  const double left = 64, right = 16, top = 28, bottom = 42;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  const auto y_of = [&](double y) { return chart.log_y ? std::log10(y) : y; };
  // A point is drawn when both coordinates are finite (and y positive on a log axis).
  const auto drawn = [&](double x, double y) { return std::isfinite(x) && std::isfinite(y) && !(chart.log_y && y <= 0); };
  for (const ChartSeries& s : chart.series)
    for (const auto& [x, y] : s.points) {
      if (!drawn(x, y)) continue;
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y_of(y));
      y_hi = std::max(y_hi, y_of(y));
    }
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) + "\">";
  svg += "<text x=\"" + number(width / 2.0) + "\" y=\"18\" text-anchor=\"middle\" class=\"title\">" + escape_html(chart.title) + "</text>";
  if (!std::isfinite(x_lo)) return svg + "<text x=\"" + number(width / 2.0) + "\" y=\"" + number(height / 2.0) +
                                   "\" text-anchor=\"middle\" class=\"note\">no data yet</text></svg>";
  x_lo = std::min(x_lo, 0.0);  // steps and epochs: the axis starts at the run's start
  if (x_hi == x_lo) x_hi = x_lo + 1;
  if (y_hi == y_lo) {  // one value: a band of 10% around it
    const double half = std::max(std::fabs(y_hi) * 0.1, 1e-9);
    y_lo -= half;
    y_hi += half;
  }
  const double pad = (y_hi - y_lo) * 0.05;
  y_lo -= pad;
  y_hi += pad;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  const auto py = [&](double y) { return top + (1.0 - (y - y_lo) / (y_hi - y_lo)) * plot_h; };
  svg += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(plot_w) + "\" height=\"" + number(plot_h) +
         "\" class=\"frame\"/>";
  const std::vector<double> x_ticks = nice_ticks(x_lo, x_hi, 6);
  const double x_spacing = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1.0;
  for (const double t : x_ticks) {
    svg += "<line x1=\"" + number(px(t)) + "\" y1=\"" + number(top) + "\" x2=\"" + number(px(t)) + "\" y2=\"" + number(top + plot_h) +
           "\" class=\"grid\"/>";
    svg += "<text x=\"" + number(px(t)) + "\" y=\"" + number(top + plot_h + 14) + "\" text-anchor=\"middle\">" + tick_label(t, x_spacing) + "</text>";
  }
  const std::vector<double> y_ticks = chart.log_y ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, 5);
  for (size_t i = 0; i < y_ticks.size(); ++i) {
    const double t = y_ticks[i];
    svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(py(t)) + "\" x2=\"" + number(left + plot_w) + "\" y2=\"" + number(py(t)) +
           "\" class=\"grid\"/>";
    const double shown = chart.log_y ? std::pow(10.0, t) : t;
    // The spacing to the neighbouring tick decides the decimals (on a log axis, in values).
    const double next = i + 1 < y_ticks.size() ? y_ticks[i + 1] : i > 0 ? 2 * t - y_ticks[i - 1] : t + 1;
    const double spacing = std::fabs((chart.log_y ? std::pow(10.0, next) : next) - shown);
    svg += "<text x=\"" + number(left - 6) + "\" y=\"" + number(py(t) + 4) + "\" text-anchor=\"end\">" + tick_label(shown, spacing) +
           "</text>";
  }
  svg += "<text x=\"" + number(left + plot_w / 2) + "\" y=\"" + number(height - 6.0) + "\" text-anchor=\"middle\">" +
         escape_html(chart.x_label) + "</text>";
  svg += "<text transform=\"translate(14," + number(top + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape_html(chart.y_label) + "</text>";
  double legend_x = left + 8;
  for (const ChartSeries& s : chart.series) {
    std::string path;
    size_t shown = 0;
    for (const auto& [x, y] : s.points) {
      if (!drawn(x, y)) continue;
      if (shown++) path += ' ';
      path += number(px(x));
      path += ',';
      path += number(py(y_of(y)));
    }
    if (shown == 0) continue;
    const std::string stroke = "stroke=\"" + s.colour + "\"" + (s.dashed ? " stroke-dasharray=\"5,3\"" : "");
    svg += "<polyline class=\"series\" fill=\"none\" stroke-width=\"1.8\" " + stroke + " points=\"" + path + "\"/>";
    if (shown <= 40)
      for (const auto& [x, y] : s.points)
        if (drawn(x, y))
          svg += "<circle cx=\"" + number(px(x)) + "\" cy=\"" + number(py(y_of(y))) + "\" r=\"2.5\" fill=\"" + s.colour + "\"/>";
    svg += "<line x1=\"" + number(legend_x) + "\" y1=\"" + number(top + 12) + "\" x2=\"" + number(legend_x + 18) + "\" y2=\"" +
           number(top + 12) + "\" stroke-width=\"2\" " + stroke + "/>";
    svg += "<text x=\"" + number(legend_x + 22) + "\" y=\"" + number(top + 16) + "\" class=\"legend\">" + escape_html(s.name) + "</text>";
    legend_x += 30 + 6.5 * static_cast<double>(s.name.size());
  }
  return svg + "</svg>";
}

}  // namespace cnn::train
