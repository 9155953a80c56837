#include "shardwise/cuda/muon_cuda.hpp"

#include <utility>
#include <vector>

#include "cuda_status.hpp"
#include "muon_kernels.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cuda {
namespace {

// Checked before cuBLAS starts, so the argument error wins over a missing GPU.
optim::MuonOptions supported(optim::MuonOptions options) {
  SW_REQUIRE(options.tensor_parallel.empty(), InvalidArgument,
             "MuonCuda: tensor-parallel params are not supported on the device yet");
  return options;
}

}  // namespace

MuonCuda::MuonCuda(optim::MuonOptions options, bool allow_tf32, void* stream)
    : options_(supported(std::move(options))),
      newton_schulz_(options_.newton_schulz, allow_tf32, stream),
      stream_(stream) {}

void MuonCuda::step(const MuonDeviceParam& p, double lr, double weight_decay, double momentum) {
  SW_REQUIRE(p.rows >= 0 && p.cols >= 0, ShapeError, "MuonCuda: a ", p.rows, " x ", p.cols,
             " matrix");
  const std::int64_t n = p.rows * p.cols;
  if (n == 0) return;
  std::vector<std::int64_t> parts = {p.rows};
  if (options_.split_qkv && !p.qkv_split.empty())
    parts.assign(p.qkv_split.begin(), p.qkv_split.end());
  // orthogonalize_row_blocks checks the split before anything runs; check it here too, before the
  // param and momentum are touched.
  std::int64_t total = 0;
  for (std::int64_t r : parts) {
    SW_REQUIRE(r > 0, ShapeError, "MuonCuda: qkv_split has a part of ", r, " rows");
    total += r;
  }
  SW_REQUIRE(total == p.rows, ShapeError, "MuonCuda: qkv_split sums to ", total,
             " rows but the param has ", p.rows);

  const cudaStream_t stream = detail::as_stream(stream_);
  update_.reserve(static_cast<std::size_t>(n) * sizeof(float));
  float* u = update_.as<float>();
  const detail::MuonMomentumScalars s{
      weight_decay != 0.0, static_cast<float>(1.0 - lr * weight_decay),
      static_cast<float>(momentum), static_cast<float>(1.0 - momentum), options_.nesterov};
  detail::launch_muon_momentum(s, p.param, p.grad, p.momentum, u, n, stream);
  newton_schulz_.orthogonalize_row_blocks(u, p.rows, p.cols, parts, u);

  std::int64_t first = 0;
  for (std::int64_t part_rows : parts) {
    const double scale = optim::muon_scale_factor(options_.scale_mode, part_rows, p.cols) *
                         options_.extra_scale_factor;
    const auto step = static_cast<float>(lr * scale);
    detail::launch_apply_update(p.param + first * p.cols, u + first * p.cols, part_rows * p.cols,
                                step, stream);
    first += part_rows;
  }
}

}  // namespace shardwise::cuda
