// Loss curves as a standalone SVG (no plotting dependency): one polyline per series (with a
// marker per point where asked), a labelled y axis that is logarithmic when every value is
// positive (else linear), round tick values, a legend. Written atomically.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace shardwise {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (step, value)
  bool markers = false;  // also a marker per point (sparse series such as evaluations)
};

std::string render_loss_plot_svg(const std::vector<PlotSeries>& series, const std::string& title);
void write_loss_plot(const std::string& path, const std::vector<PlotSeries>& series,
                     const std::string& title);

}  // namespace shardwise
