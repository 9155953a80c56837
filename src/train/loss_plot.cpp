#include "shardwise/train/loss_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/xml_text.hpp"

namespace shardwise {

namespace {

constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kRight = 20, kTop = 40, kBottom = 50;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

// Tick label: at most 3 significant digits, no trailing zeros ("0.05", "1", "250", "1e-05").
std::string tick_label(double value) {
  std::ostringstream out;
  out.precision(3);
  out << value;
  return out.str();
}

// Round steps (1, 2 or 5 times a power of ten) covering [lo, hi] with at most ~max_ticks ticks.
std::vector<double> linear_ticks(double lo, double hi, int max_ticks) {
  const double raw = (hi - lo) / std::max(1, max_ticks - 1);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  double step = decade * 10;
  for (double m : {1.0, 2.0, 5.0}) {
    if (decade * m >= raw) {
      step = decade * m;
      break;
    }
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

// Decades between the (decade-aligned) bounds; with few decades also 2x and 5x.
std::vector<double> log_ticks(double lo, double hi) {
  const int first = static_cast<int>(std::lround(std::log10(lo)));
  const int last = static_cast<int>(std::lround(std::log10(hi)));
  std::vector<double> ticks;
  for (int k = first; k <= last; ++k) {
    const double decade = std::pow(10.0, k);
    ticks.push_back(decade);
    if (last - first <= 2 && k < last) {
      ticks.push_back(2 * decade);
      ticks.push_back(5 * decade);
    }
  }
  return ticks;
}

struct Axes {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_y = false;
  double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;

  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * pw; }
  double py(double y) const {
    const double f = log_y ? (std::log10(y) - std::log10(y0)) / (std::log10(y1) - std::log10(y0))
                           : (y - y0) / (y1 - y0);
    return kTop + (1 - f) * ph;
  }
};

// Data bounds; the y axis is logarithmic (decade-aligned) when every value is positive, so the
// late, small losses stay readable; otherwise linear from min(0, lowest).
Axes make_axes(const std::vector<PlotSeries>& series) {
  double x0 = std::numeric_limits<double>::max(), x1 = std::numeric_limits<double>::lowest();
  double y0 = x0, y1 = x1;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  Axes a;
  if (x0 > x1) return a;
  a.x0 = x0, a.x1 = x1 == x0 ? x0 + 1 : x1;
  a.log_y = y0 > 0;
  if (a.log_y) {
    a.y0 = std::pow(10.0, std::floor(std::log10(y0)));
    a.y1 = std::pow(10.0, std::ceil(std::log10(y1)));
    if (a.y1 <= a.y0) a.y1 = a.y0 * 10;
  } else {
    a.y0 = std::min(0.0, y0), a.y1 = y1 == a.y0 ? a.y0 + 1 : y1;
  }
  return a;
}

void draw_grid(std::ostringstream& svg, const Axes& a) {
  const auto y_ticks = a.log_y ? log_ticks(a.y0, a.y1) : linear_ticks(a.y0, a.y1, 6);
  for (double y : y_ticks) {
    svg << "<line class=\"ytick\" x1=\"" << kLeft << "\" x2=\"" << kLeft + a.pw << "\" y1=\""
        << a.py(y) << "\" y2=\"" << a.py(y) << "\" stroke=\"#ddd\"/>\n"
        << "<text class=\"ytick\" x=\"" << kLeft - 6 << "\" y=\"" << a.py(y) + 4
        << "\" text-anchor=\"end\">" << tick_label(y) << "</text>\n";
  }
  for (double x : linear_ticks(a.x0, a.x1, 7)) {
    svg << "<text class=\"xtick\" x=\"" << a.px(x) << "\" y=\"" << kTop + a.ph + 18
        << "\" text-anchor=\"middle\">" << tick_label(x) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << a.pw << "\" height=\""
      << a.ph << "\" fill=\"none\" stroke=\"#333\"/>\n"
      << "<text x=\"" << kLeft + a.pw / 2 << "\" y=\"" << kHeight - 10
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text class=\"ylabel\" x=\"18\" y=\"" << kTop + a.ph / 2
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << kTop + a.ph / 2 << ")\">"
      << (a.log_y ? "loss (log scale)" : "loss") << "</text>\n";
}

void draw_series(std::ostringstream& svg, const Axes& a, const PlotSeries& s, std::size_t i) {
  const char* color = kColors[i % std::size(kColors)];
  svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
  for (const auto& [x, y] : s.points) {
    if (std::isfinite(y)) svg << a.px(x) << "," << a.py(y) << " ";
  }
  svg << "\"/>\n";
  if (s.markers) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      svg << "<circle cx=\"" << a.px(x) << "\" cy=\"" << a.py(y) << "\" r=\"3.5\" fill=\"white\" "
          << "stroke=\"" << color << "\" stroke-width=\"1.5\"/>\n";
    }
  }
  svg << "<text x=\"" << kLeft + a.pw - 10 << "\" y=\"" << kTop + 18 + 16 * i
      << "\" text-anchor=\"end\" fill=\"" << color << "\">" << xml_escape(s.label) << "</text>\n";
}

}  // namespace

std::string render_loss_plot_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  const Axes axes = make_axes(series);
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << xml_escape(title) << "</text>\n";
  draw_grid(svg, axes);
  for (std::size_t i = 0; i < series.size(); ++i) draw_series(svg, axes, series[i], i);
  svg << "</svg>\n";
  return svg.str();
}

void write_loss_plot(const std::string& path, const std::vector<PlotSeries>& series,
                     const std::string& title) {
  write_file_atomic(path, render_loss_plot_svg(series, title));
}

}  // namespace shardwise
