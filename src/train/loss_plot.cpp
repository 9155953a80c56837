#include "shardwise/train/loss_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "shardwise/core/atomic_file.hpp"

namespace shardwise {

namespace {

constexpr double kWidth = 720, kHeight = 420, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string render_loss_plot_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  double x0 = std::numeric_limits<double>::max(), x1 = std::numeric_limits<double>::lowest();
  double y0 = x0, y1 = x1;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  y0 = std::min(0.0, y0);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
      << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << escape(title) << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double y = y0 + (y1 - y0) * i / 5, x = x0 + (x1 - x0) * i / 5;
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << py(y) << "\" y2=\""
        << py(y) << "\" stroke=\"#ddd\"/>\n"
        << "<text x=\"" << kLeft - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">"
        << std::round(y * 1000) / 1000 << "</text>\n"
        << "<text x=\"" << px(x) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">"
        << std::round(x) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#333\"/>\n"
      << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 10
      << "\" text-anchor=\"middle\">step</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
    for (const auto& [x, y] : series[i].points) {
      if (std::isfinite(y)) svg << px(x) << "," << py(y) << " ";
    }
    svg << "\"/>\n";
    // Sparse series (evaluations) also get a dot per point so single values stay visible.
    if (series[i].points.size() <= 50) {
      for (const auto& [x, y] : series[i].points) {
        if (std::isfinite(y)) {
          svg << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"3\" fill=\"" << color
              << "\"/>\n";
        }
      }
    }
    svg << "<text x=\"" << kLeft + pw - 10 << "\" y=\"" << kTop + 18 + 16 * i
        << "\" text-anchor=\"end\" fill=\"" << color << "\">" << escape(series[i].label)
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_loss_plot(const std::string& path, const std::vector<PlotSeries>& series,
                     const std::string& title) {
  write_file_atomic(path, render_loss_plot_svg(series, title));
}

}  // namespace shardwise
