#include "shardwise/train/loss_plot.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace shardwise {
namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Labels of the ticks of one axis ("ytick" or "xtick"), top to bottom / left to right.
std::vector<std::string> tick_labels(const std::string& svg, const std::string& axis) {
  std::vector<std::string> labels;
  const std::regex text("<text class=\"" + axis + "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    labels.push_back((*it)[1]);
  }
  return labels;
}

// The cy of every marker, in drawing order.
std::vector<double> marker_ys(const std::string& svg) {
  std::vector<double> ys;
  const std::regex circle("<circle cx=\"[^\"]*\" cy=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator();
       ++it) {
    ys.push_back(std::stod((*it)[1]));
  }
  return ys;
}

TEST(LossPlot, OnePolylinePerSeriesMarkersWhereAskedAndEscapedText) {
  PlotSeries train{"train <loss>", {}}, eval{"eval & held-out", {{10, 1.0}, {20, 0.5}}, true};
  for (int s = 1; s <= 100; ++s) train.points.emplace_back(s, 3.0 / s);
  train.points.emplace_back(101, std::nan(""));  // non-finite values are skipped, not drawn
  const std::string svg = render_loss_plot_svg({train, eval}, "run \"a\"");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u) << "the held-out series is a line too";
  EXPECT_EQ(count(svg, "<circle"), 2u) << "markers only on the series that asks for them";
  EXPECT_NE(svg.find("train &lt;loss&gt;"), std::string::npos);
  EXPECT_NE(svg.find("eval &amp; held-out"), std::string::npos);
  EXPECT_NE(svg.find("run &quot;a&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(LossPlot, PositiveLossesGetALabelledLogAxisWithRoundTicks) {
  // Losses from 3 down to 0.002: on a linear axis everything after the first steps would sit on
  // zero. The log axis spans the decades 0.001 .. 10.
  PlotSeries train{"train", {}}, eval{"held-out", {{0, 1.0}, {300, 0.1}, {600, 0.01}}, true};
  for (int s = 0; s <= 600; s += 10) train.points.emplace_back(s, 3.0 * std::pow(0.987, s));
  const std::string svg = render_loss_plot_svg({train, eval}, "t");
  EXPECT_NE(svg.find(">loss (log scale)</text>"), std::string::npos);
  EXPECT_EQ(tick_labels(svg, "ytick"),
            (std::vector<std::string>{"0.001", "0.01", "0.1", "1", "10"}));
  EXPECT_EQ(tick_labels(svg, "xtick"),
            (std::vector<std::string>{"0", "100", "200", "300", "400", "500", "600"}));
  // Equal ratios are equal distances: 1 -> 0.1 and 0.1 -> 0.01 are the same height apart.
  const auto ys = marker_ys(svg);
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_GT(ys[1], ys[0]) << "smaller losses lower on the plot";
  EXPECT_NEAR(ys[1] - ys[0], ys[2] - ys[1], 1e-6);
}

TEST(LossPlot, FewDecadesGetTwoAndFiveTicksAndNonPositiveValuesALinearAxis) {
  PlotSeries narrow{"n", {{1, 0.3}, {2, 0.6}}};
  EXPECT_EQ(tick_labels(render_loss_plot_svg({narrow}, "t"), "ytick"),
            (std::vector<std::string>{"0.1", "0.2", "0.5", "1"}));
  PlotSeries signed_values{"s", {{0, -0.5}, {7, 1.2}}};
  const std::string svg = render_loss_plot_svg({signed_values}, "t");
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_EQ(tick_labels(svg, "ytick"), (std::vector<std::string>{"-0.5", "0", "0.5", "1"}));
  EXPECT_EQ(tick_labels(svg, "xtick"), (std::vector<std::string>{"0", "2", "4", "6"}));
}

}  // namespace
}  // namespace shardwise
