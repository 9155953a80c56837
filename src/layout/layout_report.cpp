#include "shardwise/layout/layout_report.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "shardwise/core/error.hpp"
#include "shardwise/core/xml_text.hpp"
#include "shardwise/layout/layout_cost.hpp"

namespace shardwise {
namespace {

using OrderedJson = nlohmann::ordered_json;

void check_input(const LayoutReportInput& input) {
  SW_CHECK(input.params && input.layout && input.options && input.stats,
           "layout report needs params, layout, options and stats");
}

std::int64_t buffer_unpadded(const PerBufferParamLayout& buffer) {
  std::int64_t total = 0;
  for (const ParamRange& range : buffer.param_index_map) total += range.numel();
  return total;
}

std::string grouped(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string scientific(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4e", value);
  return text;
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 3) + "%"; }

std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string describe_key(const BufferKey& key, const PerBufferParamLayout& buffer) {
  return str_cat(dtype_name(key.param_dtype), " params / ", dtype_name(key.grad_dtype), " grads, ",
                 key.is_expert_parallel ? "expert-parallel" : "dense", ", ",
                 key.is_layer_wise ? "layer-wise" : "not layer-wise", ", ",
                 buffer.shard_aligned ? "shard-aligned" : "element-sharded", ", ",
                 buffer.num_shards, " shards");
}

// Rows [0, n) are shown in full when n <= max_rows, else the first and last max_rows/2.
void for_shown_rows(std::size_t n, int max_rows, const std::function<void(std::size_t)>& row,
                    const std::function<void(std::size_t)>& gap) {
  const std::size_t limit = static_cast<std::size_t>(std::max(max_rows, 2));
  if (n <= limit) {
    for (std::size_t i = 0; i < n; ++i) row(i);
    return;
  }
  const std::size_t head = limit / 2;
  const std::size_t tail = limit - head;
  for (std::size_t i = 0; i < head; ++i) row(i);
  gap(n - head - tail);
  for (std::size_t i = n - tail; i < n; ++i) row(i);
}

// The kind of a param is its name without layer / expert numbers ("attn.qkv.weight"), so every
// layer's qkv gets the same colour.
std::string param_kind(const std::string& name) {
  std::string kind;
  std::size_t i = 0;
  while (i < name.size()) {
    std::size_t dot = name.find('.', i);
    if (dot == std::string::npos) dot = name.size();
    const std::string part = name.substr(i, dot - i);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric && part != "layers") kind += (kind.empty() ? "" : ".") + part;
    i = dot + 1;
  }
  return kind;
}

// Distinct colours for the first kinds in model order; later kinds reuse the palette.
std::map<std::string, const char*> kind_colours(const ParamList& params) {
  static const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
                                         "#d37295", "#a0cbe8", "#8cd17d", "#b6992d", "#499894"};
  constexpr std::size_t kColours = sizeof kPalette / sizeof kPalette[0];
  std::map<std::string, const char*> colours;
  for (const ParamInfo& param : params) {
    const std::string kind = param_kind(param.name);
    if (!colours.count(kind)) colours[kind] = kPalette[colours.size() % kColours];
  }
  return colours;
}

// The last two name components ("qkv.weight"), which fit in a box label.
std::string short_label(const std::string& name) {
  const std::size_t last = name.rfind('.');
  if (last == std::string::npos || last == 0) return name;
  const std::size_t before = name.rfind('.', last - 1);
  return before == std::string::npos ? name : name.substr(before + 1);
}

double padding_fraction(std::int64_t unpadded, std::int64_t padded) {
  return padded > 0 ? 1.0 - static_cast<double>(unpadded) / static_cast<double>(padded) : 0.0;
}

// One buffer: its key, sizes and one row per bucket (elided past report.max_bucket_rows).
void append_buffer_text(std::string& out, int index, const BufferKey& key,
                        const PerBufferParamLayout& buffer, const TextReportOptions& report) {
  const std::int64_t unpadded = buffer_unpadded(buffer);
  out += str_cat("\nbuffer ", index, ": ", describe_key(key, buffer), "\n");
  out += str_cat("  ", buffer.param_index_map.size(), " params, ", buffer.bucket_indices.size(),
                 " buckets, numel ", grouped(buffer.numel()), " (unpadded ", grouped(unpadded),
                 ", padding ", percent(padding_fraction(unpadded, buffer.numel())), ")\n");
  out +=
      "  bucket            start              end       shard size         unpadded     "
      "padding\n";
  for_shown_rows(
      buffer.bucket_indices.size(), report.max_bucket_rows,
      [&](std::size_t b) {
        const BucketRange& bucket = buffer.bucket_indices[b];
        const std::int64_t real =
            b < buffer.per_bucket_numel_unpadded.size() ? buffer.per_bucket_numel_unpadded[b] : 0;
        out += str_cat("  ", pad_left(std::to_string(b), 6), pad_left(grouped(bucket.start), 17),
                       pad_left(grouped(bucket.end), 17),
                       pad_left(grouped(bucket.numel() / buffer.num_shards), 17),
                       pad_left(grouped(real), 17),
                       pad_left(percent(padding_fraction(real, bucket.numel())), 12), "\n");
      },
      [&](std::size_t hidden) { out += str_cat("  ... ", hidden, " more buckets ...\n"); });
}

// How the layer-wise cut search ran (LayoutOptions::overlap_aware_cuts): "overlap_aware" or
// "plain", the values of the training config's ddp.layer_wise_cuts.
std::string layer_wise_cuts_name(const LayoutOptions& options) {
  return options.overlap_aware_cuts ? "overlap_aware" : "plain";
}

// Per-rank bytes of one buffer (or the total) for the chosen shard group size.
std::string cost_text(const BufferCost& cost) {
  return str_cat("per rank: param ", grouped(cost.param_bytes), " B, grad ",
                 grouped(cost.grad_bytes), " B, optimizer state ",
                 grouped(cost.optimizer_state_bytes), " B; comm ", grouped(cost.comm_bytes),
                 " B/step (exposed last-bucket reduce-scatter ", grouped(cost.exposed_rs_bytes),
                 " B); padding ", grouped(cost.padding_numel()), " elements (",
                 percent(cost.padding_fraction()), ")\n");
}

OrderedJson cost_json(const BufferCost& cost) {
  OrderedJson out;
  out["replicas"] = cost.replicas;
  out["padding_numel"] = cost.padding_numel();
  out["padding_fraction"] = cost.padding_fraction();
  out["param_bytes"] = cost.param_bytes;
  out["grad_bytes"] = cost.grad_bytes;
  out["optimizer_state_bytes"] = cost.optimizer_state_bytes;
  out["memory_bytes"] = cost.memory_bytes();
  out["comm_bytes"] = cost.comm_bytes;
  out["exposed_rs_bytes"] = cost.exposed_rs_bytes;
  return out;
}

OrderedJson choice_json(const ShardGroupChoice& choice) {
  OrderedJson out;
  out["chosen"] = choice.shard_group_size;
  OrderedJson rows = OrderedJson::array();
  for (const ShardGroupCandidate& c : choice.table) {
    OrderedJson row;
    row["shard_group_size"] = c.shard_group_size;
    row["padding_fraction"] = c.padding_fraction;
    row["param_grad_bytes"] = c.param_grad_bytes;
    row["optimizer_state_bytes"] = c.optimizer_state_bytes;
    row["comm_bytes"] = c.comm_bytes;
    row["exposed_rs_bytes"] = c.exposed_rs_bytes;
    rows.push_back(std::move(row));
  }
  out["candidates"] = std::move(rows);
  return out;
}

// Per-rank numel and Newton-Schulz cost; with rows elided, min / max / mean rows follow.
void append_rank_loads_text(std::string& out, const LayoutStats& stats,
                            const TextReportOptions& report) {
  const std::size_t num_ranks = stats.ranks.size();
  double mean_cost = 0.0;
  double mean_numel = 0.0;
  for (const RankLoad& load : stats.ranks) {
    mean_cost += load.ns_cost;
    mean_numel += static_cast<double>(load.numel);
  }
  if (num_ranks > 0) {
    mean_cost /= static_cast<double>(num_ranks);
    mean_numel /= static_cast<double>(num_ranks);
  }
  out += str_cat("\nper-rank load (", num_ranks, " ranks; NS cost = Newton-Schulz flops proxy)\n");
  out += "    rank            numel        NS cost   cost/mean\n";
  auto rank_row = [&](const std::string& label, double numel, double cost) {
    out += str_cat("  ", pad_left(label, 6), pad_left(grouped(std::llround(numel)), 17),
                   pad_left(scientific(cost), 15),
                   pad_left(fixed(mean_cost > 0 ? cost / mean_cost : 1.0, 4), 12), "\n");
  };
  for_shown_rows(
      num_ranks, report.max_rank_rows,
      [&](std::size_t r) {
        rank_row(std::to_string(stats.ranks[r].rank), static_cast<double>(stats.ranks[r].numel),
                 stats.ranks[r].ns_cost);
      },
      [&](std::size_t hidden) { out += str_cat("     ... ", hidden, " more ranks ...\n"); });
  if (num_ranks > static_cast<std::size_t>(std::max(report.max_rank_rows, 2))) {
    const auto [min_it, max_it] = std::minmax_element(
        stats.ranks.begin(), stats.ranks.end(),
        [](const RankLoad& a, const RankLoad& b) { return a.ns_cost < b.ns_cost; });
    rank_row("min", static_cast<double>(min_it->numel), min_it->ns_cost);
    rank_row("max", static_cast<double>(max_it->numel), max_it->ns_cost);
    rank_row("mean", mean_numel, mean_cost);
  }
}

// Geometry of the SVG drawing, in pixels.
constexpr double kSvgLeft = 70.0;     // room for bucket labels
constexpr double kSvgWidth = 1000.0;  // width of the shard grid
constexpr double kSvgGridHeight = 800.0;
constexpr double kSvgMinBucketHeight = 4.0;
constexpr double kSvgHeaderHeight = 34.0;
constexpr double kSvgBufferGap = 16.0;

// Pixels per element of a shard: one vertical scale for every buffer so bucket heights compare
// across buffers.
double svg_scale(const FullParamLayout& layout) {
  double total_shard_numel = 0.0;
  for (const auto& [key, buffer] : layout.layouts) {
    for (const BucketRange& bucket : buffer.bucket_indices) {
      total_shard_numel += static_cast<double>(bucket.numel()) / buffer.num_shards;
    }
  }
  return total_shard_numel > 0 ? kSvgGridHeight / total_shard_numel : 0.0;
}

void draw_buffer_heading(std::string& body, double& y, int index, const BufferKey& key,
                         const PerBufferParamLayout& buffer) {
  body += str_cat("<text x=\"4\" y=\"", fixed(y + 14, 1), "\" class=\"h\">buffer ", index, ": ",
                  xml_escape(describe_key(key, buffer)), "</text>\n");
  body += str_cat("<text x=\"", kSvgLeft, "\" y=\"", fixed(y + 28, 1),
                  "\" class=\"s\">columns = shards 0..", buffer.num_shards - 1,
                  ", rows = buckets; box height = elements</text>\n");
  y += kSvgHeaderHeight;
}

// The band of rows each bucket occupies.
struct BucketBands {
  std::vector<double> top;
  std::vector<double> height;
};

// One grey (padding) box per bucket; the params are drawn over it.
BucketBands draw_bucket_boxes(std::string& body, double& y, const PerBufferParamLayout& buffer,
                              double scale) {
  const int n = buffer.num_shards;
  BucketBands bands;
  for (std::size_t b = 0; b < buffer.bucket_indices.size(); ++b) {
    const BucketRange& bucket = buffer.bucket_indices[b];
    const double height =
        std::max(kSvgMinBucketHeight, scale * static_cast<double>(bucket.numel()) / n);
    bands.top.push_back(y);
    bands.height.push_back(height);
    body += str_cat("<rect x=\"", kSvgLeft, "\" y=\"", fixed(y, 2), "\" width=\"", kSvgWidth,
                    "\" height=\"", fixed(height, 2), "\" class=\"pad\"><title>bucket ", b, " [",
                    bucket.start, ", ", bucket.end, "): ", bucket.numel() / n,
                    " elements per shard</title></rect>\n");
    if (height >= 10.0) {
      body +=
          str_cat("<text x=\"", kSvgLeft - 4, "\" y=\"", fixed(y + std::min(height, 20.0) - 3, 2),
                  "\" class=\"s\" text-anchor=\"end\">bucket ", b, "</text>\n");
    }
    y += height;
  }
  return bands;
}

// How one param is drawn: its bucket's band, the shard columns and its look.
struct ParamBoxes {
  double column = 0;  // width of one shard column
  double top = 0;     // the bucket's band
  double height = 0;
  std::int64_t shard_size = 1;
  const char* colour = "";
  std::string title;  // tooltip, escaped
  std::string label;  // short name, unescaped
};

// The piece of the param inside shard columns [s_first, s_last], rows [lo, hi) of the shard.
void draw_param_piece(std::string& body, const ParamBoxes& p, std::int64_t s_first,
                      std::int64_t s_last, std::int64_t lo, std::int64_t hi, bool label) {
  const double x = kSvgLeft + p.column * static_cast<double>(s_first);
  const double w = p.column * static_cast<double>(s_last - s_first + 1);
  const double top = p.top + p.height * static_cast<double>(lo) / p.shard_size;
  const double h = std::max(0.5, p.height * static_cast<double>(hi - lo) / p.shard_size);
  body += str_cat("<rect x=\"", fixed(x, 2), "\" y=\"", fixed(top, 2), "\" width=\"", fixed(w, 2),
                  "\" height=\"", fixed(h, 2), "\" fill=\"", p.colour, "\"><title>", p.title,
                  "</title></rect>\n");
  if (label && w >= 40.0 && h >= 11.0) {
    const auto fits = static_cast<std::size_t>((w - 4.0) / 6.0);
    body += str_cat("<text x=\"", fixed(x + 2, 2), "\" y=\"", fixed(top + std::min(h, 20.0) - 3, 2),
                    "\" class=\"l\">", xml_escape(p.label.substr(0, fits)), "</text>\n");
  }
}

// A param's boxes: one piece when it sits in one shard; an element-sharded param spanning
// shards gets a partial head, full middle columns and a partial tail.
void draw_param(std::string& body, const ParamRange& range, const PerBufferParamLayout& buffer,
                const BucketBands& bands, const std::string& name, const char* colour) {
  const std::size_t b = static_cast<std::size_t>(range.bucket);
  SW_CHECK(b < buffer.bucket_indices.size(), "param ", range.param, " in unknown bucket ", b);
  const BucketRange& bucket = buffer.bucket_indices[b];
  ParamBoxes p;
  p.column = kSvgWidth / buffer.num_shards;
  p.top = bands.top[b];
  p.height = bands.height[b];
  p.shard_size = std::max<std::int64_t>(bucket.numel() / buffer.num_shards, 1);
  p.colour = colour;
  const std::string shard_text =
      buffer.shard_aligned ? str_cat(", shard ", buffer.owner_shard(range)) : std::string();
  p.title = xml_escape(str_cat(name, " [", range.start, ", ", range.end, ") bucket ", range.bucket,
                               shard_text, ", ", range.numel(), " elements"));
  p.label = short_label(name);
  const std::int64_t first = (range.start - bucket.start) / p.shard_size;
  const std::int64_t last = (range.end - 1 - bucket.start) / p.shard_size;
  const std::int64_t first_offset = range.start - bucket.start - first * p.shard_size;
  const std::int64_t last_offset = range.end - bucket.start - last * p.shard_size;
  if (first == last) {
    draw_param_piece(body, p, first, first, first_offset, last_offset, true);
    return;
  }
  draw_param_piece(body, p, first, first, first_offset, p.shard_size, true);
  if (last > first + 1) draw_param_piece(body, p, first + 1, last - 1, 0, p.shard_size, true);
  draw_param_piece(body, p, last, last, 0, last_offset, false);
}

// Black lines between buckets, white lines between shard columns (when columns are wide enough).
void draw_separators(std::string& body, const BucketBands& bands, int num_shards, double y) {
  for (std::size_t b = 1; b < bands.top.size(); ++b) {
    body +=
        str_cat("<line x1=\"", kSvgLeft, "\" y1=\"", fixed(bands.top[b], 2), "\" x2=\"",
                kSvgLeft + kSvgWidth, "\" y2=\"", fixed(bands.top[b], 2), "\" class=\"bsep\"/>\n");
  }
  const double column = kSvgWidth / num_shards;
  if (column < 3.0) return;
  for (int s = 1; s < num_shards; ++s) {
    const double x = kSvgLeft + column * s;
    body += str_cat("<line x1=\"", fixed(x, 2), "\" y1=\"",
                    fixed(bands.top.empty() ? y : bands.top[0], 2), "\" x2=\"", fixed(x, 2),
                    "\" y2=\"", fixed(y, 2), "\" class=\"sep\"/>\n");
  }
}

// The document around the drawn body: size, styles and the heading line.
std::string svg_document(const LayoutReportInput& input, const std::string& body, double y) {
  const LayoutStats& stats = *input.stats;
  const std::string heading =
      xml_escape(str_cat(input.model_name, ": ", layout_algorithm_name(input.options->algorithm),
                         " layout, dp ", input.options->data_parallel_size, ", expert dp ",
                         input.options->expert_dp(), ", padding ", percent(stats.padding_fraction),
                         ", NS cost max/mean ", fixed(stats.ns_cost_max_over_mean, 4)));
  std::string svg = str_cat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"",
      kSvgLeft + kSvgWidth + 10, "\" height=\"", fixed(y + 10, 0), "\" viewBox=\"0 0 ",
      kSvgLeft + kSvgWidth + 10, " ", fixed(y + 10, 0), "\">\n",
      "<style>text{font-family:monospace}.h{font-size:13px;font-weight:bold}.s{font-size:10px;"
      "fill:#444}.l{font-size:10px;fill:#fff;pointer-events:none}.pad{fill:#e4e4e4;stroke:#999;"
      "stroke-width:0.5}.sep{stroke:#fff;stroke-width:0.6}.bsep{stroke:#000;stroke-width:1}rect:"
      "hover{stroke:#000}</style>\n",
      "<text x=\"4\" y=\"20\" class=\"h\">", heading, "</text>\n");
  svg += body;
  svg += "</svg>\n";
  return svg;
}

}  // namespace

const char* layout_algorithm_name(LayoutAlgorithm algorithm) {
  switch (algorithm) {
    case LayoutAlgorithm::kDefault:
      return "none";
    case LayoutAlgorithm::kDistributed:
      return "distributed";
    case LayoutAlgorithm::kLayerWise:
      return "layer-wise";
  }
  return "unknown";
}

std::string render_layout_json(const LayoutReportInput& input) {
  check_input(input);
  const ParamList& params = *input.params;
  const LayoutOptions& options = *input.options;
  const LayoutStats& stats = *input.stats;

  OrderedJson root;
  root["model"] = input.model_name;
  root["optimizer"] = layout_algorithm_name(options.algorithm);
  root["dp"] = options.data_parallel_size;
  root["expert_dp"] = options.expert_dp();
  root["shard_group_size"] = options.shard_group_size();
  root["bucket_size"] = options.bucket_size ? OrderedJson(*options.bucket_size) : OrderedJson();
  root["layer_wise_cuts"] = layer_wise_cuts_name(options);

  const LayoutCost cost = compute_layout_cost(*input.layout, options);
  OrderedJson buffers = OrderedJson::array();
  std::size_t buffer_index = 0;
  for (const auto& [key, buffer] : input.layout->layouts) {
    OrderedJson out;
    out["param_dtype"] = std::string(dtype_name(key.param_dtype));
    out["grad_dtype"] = std::string(dtype_name(key.grad_dtype));
    out["expert_parallel"] = key.is_expert_parallel;
    out["layer_wise"] = key.is_layer_wise;
    out["shard_aligned"] = buffer.shard_aligned;
    out["num_shards"] = buffer.num_shards;
    out["numel"] = buffer.numel();
    out["numel_unpadded"] = buffer_unpadded(buffer);
    out["cost"] = cost_json(cost.buffers.at(buffer_index++).second);
    OrderedJson buckets = OrderedJson::array();
    for (std::size_t b = 0; b < buffer.bucket_indices.size(); ++b) {
      OrderedJson bucket;
      bucket["start"] = buffer.bucket_indices[b].start;
      bucket["end"] = buffer.bucket_indices[b].end;
      bucket["numel_unpadded"] =
          b < buffer.per_bucket_numel_unpadded.size() ? buffer.per_bucket_numel_unpadded[b] : 0;
      buckets.push_back(std::move(bucket));
    }
    out["buckets"] = std::move(buckets);
    OrderedJson entries = OrderedJson::array();
    for (std::size_t i = 0; i < buffer.param_index_map.size(); ++i) {
      const ParamRange& range = buffer.param_index_map[i];
      OrderedJson entry;
      entry["name"] = params.at(range.param).name;
      entry["start"] = range.start;
      entry["end"] = range.end;
      entry["bucket"] = range.bucket;
      entry["shard"] =
          buffer.shard_aligned ? OrderedJson(buffer.owner_shard(range)) : OrderedJson();
      entry["index"] = i < buffer.param_indices.size() ? buffer.param_indices[i]
                                                       : static_cast<std::int64_t>(range.param);
      entry["param_id"] = range.param;
      entries.push_back(std::move(entry));
    }
    out["params"] = std::move(entries);
    buffers.push_back(std::move(out));
  }
  root["buffers"] = std::move(buffers);

  OrderedJson ranks = OrderedJson::array();
  for (const RankLoad& load : stats.ranks) {
    OrderedJson rank;
    rank["rank"] = load.rank;
    rank["numel"] = load.numel;
    rank["ns_cost"] = load.ns_cost;
    ranks.push_back(std::move(rank));
  }
  root["ranks"] = std::move(ranks);
  OrderedJson totals;
  totals["numel_unpadded"] = stats.numel_unpadded;
  totals["numel_padded"] = stats.numel_padded;
  totals["padding_fraction"] = stats.padding_fraction;
  totals["ns_cost_max_over_mean"] = stats.ns_cost_max_over_mean;
  totals["cost"] = cost_json(cost.total);
  root["totals"] = std::move(totals);
  if (input.shard_group_choice) root["shard_group_choice"] = choice_json(*input.shard_group_choice);
  return root.dump(1) + "\n";
}

std::string render_layout_text(const LayoutReportInput& input, const TextReportOptions& report) {
  check_input(input);
  const LayoutOptions& options = *input.options;
  const LayoutStats& stats = *input.stats;
  std::int64_t model_numel = 0;
  for (const ParamInfo& param : *input.params) model_numel += param.numel();

  std::string out = str_cat("model ", input.model_name, ": ", input.params->size(), " params, ",
                            grouped(model_numel), " elements\n");
  out += str_cat(
      "layout: optimizer ", layout_algorithm_name(options.algorithm), ", dp ",
      options.data_parallel_size, ", expert dp ", options.expert_dp(), ", bucket size ",
      options.bucket_size ? grouped(*options.bucket_size) : std::string("none"),
      ", grads reduced in ", options.grad_reduce_in_fp32 ? "fp32" : "param dtype",
      options.pad_buckets_for_high_nccl_busbw ? ", padded for high NCCL bus bandwidth" : "",
      options.all_layer_wise ? ", all buffers layer-wise" : "", ", ", layer_wise_cuts_name(options),
      " cuts, shard group size ", options.shard_group_size(), "\n");
  if (input.shard_group_choice) out += render_shard_group_table(*input.shard_group_choice);
  const LayoutCost cost = compute_layout_cost(*input.layout, options);
  int index = 0;
  for (const auto& [key, buffer] : input.layout->layouts) {
    append_buffer_text(out, index, key, buffer, report);
    out += "  " + cost_text(cost.buffers.at(static_cast<std::size_t>(index++)).second);
  }
  append_rank_loads_text(out, stats, report);
  out += str_cat("\ntotals: unpadded ", grouped(stats.numel_unpadded), ", padded ",
                 grouped(stats.numel_padded), ", padding ", percent(stats.padding_fraction),
                 ", NS cost max/mean ", fixed(stats.ns_cost_max_over_mean, 4), "\n");
  out += "totals " + cost_text(cost.total);
  return out;
}

std::string render_layout_svg(const LayoutReportInput& input) {
  check_input(input);
  const ParamList& params = *input.params;
  const double scale = svg_scale(*input.layout);
  const auto colours = kind_colours(params);

  std::string body;
  double y = 40.0;
  int buffer_index = 0;
  for (const auto& [key, buffer] : input.layout->layouts) {
    draw_buffer_heading(body, y, buffer_index++, key, buffer);
    const BucketBands bands = draw_bucket_boxes(body, y, buffer, scale);
    for (const ParamRange& range : buffer.param_index_map) {
      if (range.numel() <= 0) continue;
      const std::string& name = params.at(range.param).name;
      draw_param(body, range, buffer, bands, name, colours.at(param_kind(name)));
    }
    draw_separators(body, bands, buffer.num_shards, y);
    y += kSvgBufferGap;
  }
  return svg_document(input, body, y);
}

}  // namespace shardwise
