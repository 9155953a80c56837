#include "shardwise/reshard/mxfp8_reshard_transform.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t kBlock = kMxfp8BlockSize;

// A box of extents `e` as the 2-D matrix MXFP8 works on.
std::int64_t matrix_cols(const std::vector<std::int64_t>& e) { return e.empty() ? 1 : e.back(); }
std::int64_t matrix_rows(const std::vector<std::int64_t>& e) {
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < e.size(); ++d) rows *= e[d];
  return rows;
}

// Calls fn(piece_row, box_row, rows) for each run of consecutive matrix rows that the piece
// `local` (box-local) occupies in a box of extents `box`: one run per index of the dims before
// the last two.
void for_each_row_run(const Box& local, const std::vector<std::int64_t>& box,
                      const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& fn) {
  const std::size_t n = local.ndim();
  if (n <= 1) {
    fn(0, 0, 1);
    return;
  }
  const std::size_t lead = n - 2;  // dims iterated one index at a time
  const std::int64_t run = local.ranges[n - 2].stop - local.ranges[n - 2].start;
  std::vector<std::int64_t> index(lead);
  for (std::size_t d = 0; d < lead; ++d) index[d] = local.ranges[d].start;
  std::int64_t piece_row = 0;
  while (true) {
    std::int64_t box_row = 0;
    for (std::size_t d = 0; d < lead; ++d) box_row = box_row * box[d] + index[d];
    box_row = box_row * box[n - 2] + local.ranges[n - 2].start;
    fn(piece_row, box_row, run);
    piece_row += run;
    std::size_t d = lead;
    while (d > 0) {
      --d;
      if (++index[d] < local.ranges[d].stop) break;
      index[d] = local.ranges[d].start;
      if (d == 0) return;
    }
    if (lead == 0) return;
  }
}

void require_block_aligned(const std::string& param, const ReshardSlice& slice, std::int64_t start,
                           std::int64_t stop, std::int64_t box_cols, const char* side) {
  SW_REQUIRE(start % kBlock == 0 && (stop % kBlock == 0 || stop == box_cols), InvalidArgument,
             "MXFP8 convert-on-send: param ", param, " task ", slice.task_id, " piece ",
             to_string(slice.global), " is not block aligned in the ", side,
             " destination box (last-dim bounds ", start, ":", stop, " of ", box_cols,
             " must be multiples of ", kBlock, " except at the box end)");
}

}  // namespace

Mxfp8ReshardTransform::Mxfp8ReshardTransform(std::set<std::string> convertible_params,
                                             Mxfp8PersistentBuffers persistent_buffers,
                                             std::string buffer_key_prefix, bool convert_on_send,
                                             Mxfp8Options options, Mxfp8QuantizerPtr quantizer)
    : convertible_(std::move(convertible_params)),
      buffers_(std::move(persistent_buffers)),
      prefix_(std::move(buffer_key_prefix)),
      convert_on_send_(convert_on_send),
      options_(options),
      quantizer_(std::move(quantizer)) {
  SW_REQUIRE(quantizer_ != nullptr, InvalidArgument, "MXFP8 reshard: no quantizer given");
}

bool Mxfp8ReshardTransform::should_transform(const std::string& param) const {
  return convertible_.count(param) != 0;
}

const Mxfp8View& Mxfp8ReshardTransform::target(const std::string& param,
                                               const ReshardSlice& slice) const {
  std::string key = param;
  if (!prefix_.empty() && key.compare(0, prefix_.size(), prefix_) == 0)
    key = key.substr(prefix_.size());
  const auto it = buffers_.find(key);
  SW_REQUIRE(it != buffers_.end() && static_cast<std::size_t>(slice.box_index) < it->second.size(),
             InvalidArgument, "MXFP8 reshard: no persistent buffer for param ", param, " (key ",
             key, ") box ", slice.box_index, " ", to_string(slice.box));
  const Mxfp8View& v = it->second[static_cast<std::size_t>(slice.box_index)];
  const std::vector<std::int64_t> e = slice.box.extents();
  const Mxfp8Geometry g = mxfp8_geometry(matrix_rows(e), matrix_cols(e), v.layout);
  SW_REQUIRE(v.rows == g.rows && v.cols == g.cols &&
                 static_cast<std::int64_t>(v.data.size()) == g.data_bytes &&
                 static_cast<std::int64_t>(v.scale.size()) == g.scale_bytes,
             InvalidArgument, "MXFP8 reshard: persistent buffer of param ", param, " box ",
             to_string(slice.box), " is [", v.rows, ", ", v.cols, "] with ", v.data.size(), "+",
             v.scale.size(), " bytes; the box needs [", g.rows, ", ", g.cols, "] with ",
             g.data_bytes, "+", g.scale_bytes);
  return v;
}

std::vector<WireTensor> Mxfp8ReshardTransform::prepare_send(const std::string& param,
                                                            const ReshardSlice& src_slice,
                                                            TensorView src_box) {
  WireTensor piece = slice_for_wire(src_slice, src_box);
  if (!convert_on_send_) return {piece};
  const std::size_t last = src_slice.global.ndim() - 1;
  const std::int64_t origin = src_slice.global.ndim() ? src_slice.peer_box.ranges[last].start : 0;
  const std::vector<std::int64_t> pe = src_slice.global.extents();
  const std::vector<std::int64_t> de = src_slice.peer_box.extents();
  if (src_slice.global.ndim()) {
    require_block_aligned(param, src_slice, src_slice.global.ranges[last].start - origin,
                          src_slice.global.ranges[last].stop - origin, matrix_cols(de),
                          "receiver's");
  }
  Mxfp8Options opts = options_;
  opts.layout = Mxfp8ScaleLayout::kRowMajor;  // the wire form; the receiver re-lays it out
  Mxfp8Tensor q = quantizer_->quantize(piece.view(), matrix_rows(pe), matrix_cols(pe), opts);
  std::vector<WireTensor> out;
  out.push_back(WireTensor::adopt(std::move(q.data), DType::kFloat8E4M3));
  out.push_back(WireTensor::adopt(std::move(q.scale), DType::kFloat8E8M0));
  return out;
}

std::vector<WireTensor> Mxfp8ReshardTransform::prepare_recv(const std::string& param,
                                                            const ReshardSlice& dst_slice) {
  target(param, dst_slice);  // fail before anything moves
  const std::vector<std::int64_t> pe = dst_slice.local.extents();
  if (!convert_on_send_) return {WireTensor::allocate(dst_slice.dtype, dst_slice.local.numel())};
  if (dst_slice.local.ndim()) {
    const std::size_t last = dst_slice.local.ndim() - 1;
    require_block_aligned(param, dst_slice, dst_slice.local.ranges[last].start,
                          dst_slice.local.ranges[last].stop, matrix_cols(dst_slice.box.extents()),
                          "own");
  }
  const Mxfp8Geometry g =
      mxfp8_geometry(matrix_rows(pe), matrix_cols(pe), Mxfp8ScaleLayout::kRowMajor);
  return {WireTensor::allocate(DType::kFloat8E4M3, g.data_bytes),
          WireTensor::allocate(DType::kFloat8E8M0, g.scale_bytes)};
}

void Mxfp8ReshardTransform::finalize_recv(const std::string& param, const ReshardSlice& dst_slice,
                                          std::vector<WireTensor>& buffers) {
  const Mxfp8View& dst = target(param, dst_slice);
  if (convert_on_send_) {
    SW_REQUIRE(buffers.size() == 2, InvalidArgument, "MXFP8 reshard: param ", param,
               " expects data + scale, got ", buffers.size(), " tensors");
    copy_quantized(dst_slice, dst, buffers);
  } else {
    SW_REQUIRE(buffers.size() == 1, InvalidArgument, "MXFP8 reshard: param ", param,
               " expects one tensor, got ", buffers.size());
    quantize_received(param, dst_slice, dst, buffers[0].view());
  }
}

void Mxfp8ReshardTransform::copy_quantized(const ReshardSlice& slice, const Mxfp8View& dst,
                                           const std::vector<WireTensor>& buffers) const {
  const std::vector<std::int64_t> box = slice.box.extents();
  const std::int64_t piece_cols = matrix_cols(slice.local.extents());
  const std::int64_t c0 = slice.local.ndim() ? slice.local.ranges.back().start : 0;
  const std::int64_t piece_blocks = (piece_cols + kBlock - 1) / kBlock;
  const std::int64_t box_blocks = (dst.cols + kBlock - 1) / kBlock;
  const auto* data = static_cast<const std::uint8_t*>(buffers[0].view().data);
  const auto* scale = static_cast<const std::uint8_t*>(buffers[1].view().data);
  SW_CHECK(buffers[0].view().numel == slice.local.numel() &&
               buffers[1].view().numel == matrix_rows(slice.local.extents()) * piece_blocks,
           "MXFP8 reshard: received buffers do not fit piece ", to_string(slice.global));
  for_each_row_run(
      slice.local, box, [&](std::int64_t piece_row, std::int64_t box_row, std::int64_t rows) {
        for (std::int64_t r = 0; r < rows; ++r) {
          std::memcpy(dst.data.data() + (box_row + r) * dst.cols + c0,
                      data + (piece_row + r) * piece_cols, static_cast<std::size_t>(piece_cols));
          for (std::int64_t j = 0; j < piece_blocks; ++j) {
            dst.scale[static_cast<std::size_t>(
                mxfp8_scale_offset(dst.layout, box_row + r, c0 / kBlock + j, box_blocks))] =
                scale[(piece_row + r) * piece_blocks + j];
          }
        }
      });
}

void Mxfp8ReshardTransform::quantize_received(const std::string& param, const ReshardSlice& slice,
                                              const Mxfp8View& dst, TensorView piece) {
  const std::vector<std::int64_t> box = slice.box.extents();
  const std::int64_t C = dst.cols;
  const std::int64_t c0 = slice.local.ndim() ? slice.local.ranges.back().start : 0;
  const std::int64_t c1 = slice.local.ndim() ? slice.local.ranges.back().stop : 1;
  const std::int64_t piece_cols = c1 - c0;
  const std::size_t elem = dtype_size(piece.dtype);
  // [c0, head_end) and [tail_start, c1) cut a block; [head_end, tail_start) are whole blocks.
  const std::int64_t head_end = c0 % kBlock == 0 ? c0 : std::min(c1, (c0 / kBlock + 1) * kBlock);
  const std::int64_t tail_start =
      (c1 % kBlock == 0 || c1 == C) ? c1 : std::max(head_end, c1 / kBlock * kBlock);
  const bool whole = head_end == c0 && tail_start == c1;
  const auto* bytes = static_cast<const std::byte*>(piece.data);

  PartialBlocks* partial = nullptr;
  if (!whole) {
    PartialBlocks& p = partial_[{param, slice.box_index}];
    if (p.arrived.empty()) {
      p.staging.assign((static_cast<std::size_t>(dst.rows * C) * elem + 7) / 8, 0);
      p.arrived.assign(static_cast<std::size_t>(dst.rows * ((C + kBlock - 1) / kBlock)), 0);
    }
    partial = &p;
  }
  std::vector<std::uint64_t> packed;  // the whole-block columns when the piece has cut blocks
  for_each_row_run(
      slice.local, box, [&](std::int64_t piece_row, std::int64_t box_row, std::int64_t rows) {
        const std::byte* run = bytes + static_cast<std::size_t>(piece_row * piece_cols) * elem;
        if (whole) {
          quantizer_->quantize_into({const_cast<std::byte*>(run), rows * piece_cols, piece.dtype},
                                    rows, piece_cols, dst, box_row, c0, options_);
          return;
        }
        const std::int64_t mid = tail_start - head_end;
        if (mid > 0) {
          packed.assign((static_cast<std::size_t>(rows * mid) * elem + 7) / 8, 0);
          auto* out = reinterpret_cast<std::byte*>(packed.data());
          for (std::int64_t r = 0; r < rows; ++r) {
            std::memcpy(out + static_cast<std::size_t>(r * mid) * elem,
                        run + static_cast<std::size_t>(r * piece_cols + (head_end - c0)) * elem,
                        static_cast<std::size_t>(mid) * elem);
          }
          quantizer_->quantize_into({packed.data(), rows * mid, piece.dtype}, rows, mid, dst,
                                    box_row, head_end, options_);
        }
        auto* staging = reinterpret_cast<std::byte*>(partial->staging.data());
        const std::int64_t box_blocks = (C + kBlock - 1) / kBlock;
        for (const auto& [lo, hi] : {std::pair{c0, head_end}, std::pair{tail_start, c1}}) {
          if (lo >= hi) continue;
          const std::int64_t block = lo / kBlock;
          const std::int64_t block_start = block * kBlock;
          const std::int64_t block_len = std::min(kBlock, C - block_start);
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t row = box_row + r;
            std::memcpy(staging + static_cast<std::size_t>(row * C + lo) * elem,
                        run + static_cast<std::size_t>(r * piece_cols + (lo - c0)) * elem,
                        static_cast<std::size_t>(hi - lo) * elem);
            std::uint8_t& count =
                partial->arrived[static_cast<std::size_t>(row * box_blocks + block)];
            count = static_cast<std::uint8_t>(count + (hi - lo));
            SW_CHECK(count <= block_len, "MXFP8 reshard: param ", param, " block (", row, ", ",
                     block, ") received ", static_cast<int>(count), " of ", block_len, " elements");
            if (count == block_len) {
              quantizer_->quantize_into(
                  {staging + static_cast<std::size_t>(row * C + block_start) * elem, block_len,
                   piece.dtype},
                  1, block_len, dst, row, block_start, options_);
              count = 0;  // ready for the next refit
            }
          }
        }
      });
}

}  // namespace shardwise
