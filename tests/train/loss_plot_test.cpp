#include "shardwise/train/loss_plot.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace shardwise {
namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(LossPlot, OnePolylinePerSeriesDotsForSparseOnesAndEscapedText) {
  PlotSeries train{"train <loss>", {}}, eval{"eval & held-out", {{10, 1.0}, {20, 0.5}}};
  for (int s = 1; s <= 100; ++s) train.points.emplace_back(s, 3.0 / s);
  train.points.emplace_back(101, std::nan(""));  // non-finite values are skipped, not drawn
  const std::string svg = render_loss_plot_svg({train, eval}, "run \"a\"");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 2u) << "dots only for the 2-point series";
  EXPECT_NE(svg.find("train &lt;loss&gt;"), std::string::npos);
  EXPECT_NE(svg.find("eval &amp; held-out"), std::string::npos);
  EXPECT_NE(svg.find("run &quot;a&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace shardwise
