// MXFP8 codec bindings over raw numpy buffers. The Python side (shardwise/mxfp8.py) handles
// torch tensors, shapes and bf16 (which numpy lacks: it travels as uint16 bits).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace py = pybind11;

namespace shardwise::python {
namespace {

Mxfp8ScaleRule parse_rule(const std::string& name) {
  if (name == "ceil") return Mxfp8ScaleRule::kCeil;
  if (name == "floor") return Mxfp8ScaleRule::kFloor;
  throw InvalidArgument(str_cat("scale_rule: expected 'ceil' or 'floor', got '", name, "'"));
}

Mxfp8ScaleLayout parse_layout(const std::string& name) {
  if (name == "2d") return Mxfp8ScaleLayout::kRowMajor;
  if (name == "swizzled") return Mxfp8ScaleLayout::kSwizzled128x4;
  throw InvalidArgument(str_cat("scale_layout: expected '2d' or 'swizzled', got '", name, "'"));
}

// A C-contiguous array's bytes as a view of `numel` elements of `dtype`.
TensorView view_of(const py::array& a, DType dtype, std::int64_t numel, const char* what) {
  SW_REQUIRE(a.flags() & py::array::c_style, InvalidArgument, what, " must be C-contiguous");
  SW_REQUIRE(
      static_cast<std::size_t>(a.nbytes()) == static_cast<std::size_t>(numel) * dtype_size(dtype),
      ShapeError, what, ": ", a.nbytes(), " bytes, expected ", numel, " elements of ",
      dtype_name(dtype));
  return TensorView{const_cast<void*>(a.data()), numel, dtype};
}

// (data, scale) uint8 arrays: data [rows * cols], scale in the layout's byte count.
py::tuple quantize(const py::array& input, const std::string& dtype, std::int64_t rows,
                   std::int64_t cols, const std::string& rule, const std::string& layout) {
  const DType in_dtype = dtype_from_name(dtype, "quantize input");
  const TensorView in = view_of(input, in_dtype, rows * cols, "quantize input");
  Mxfp8Options options;
  options.rule = parse_rule(rule);
  options.layout = parse_layout(layout);
  const Mxfp8Geometry g = mxfp8_geometry(rows, cols, options.layout);
  py::array_t<std::uint8_t> data(g.data_bytes), scale(g.scale_bytes);
  Mxfp8View out{{data.mutable_data(), static_cast<std::size_t>(g.data_bytes)},
                {scale.mutable_data(), static_cast<std::size_t>(g.scale_bytes)},
                rows,
                cols,
                options.layout};
  std::fill_n(out.scale.data(), out.scale.size(), std::uint8_t{0});  // swizzle padding is zero
  {
    py::gil_scoped_release released;
    quantize_mxfp8_into(in, rows, cols, out, 0, 0, options);
  }
  return py::make_tuple(data, scale);
}

// Decodes into `out` (fp32, fp16, or bf16 bits in a uint16 array).
void dequantize(const py::array& data, const py::array& scale, std::int64_t rows, std::int64_t cols,
                const std::string& layout, py::array& out, const std::string& dtype) {
  const Mxfp8ScaleLayout scale_layout = parse_layout(layout);
  const Mxfp8Geometry g = mxfp8_geometry(rows, cols, scale_layout);
  const TensorView d = view_of(data, DType::kUInt8, g.data_bytes, "MXFP8 data");
  const TensorView s = view_of(scale, DType::kUInt8, g.scale_bytes, "MXFP8 scale");
  const TensorView o =
      view_of(out, dtype_from_name(dtype, "dequantize dtype"), rows * cols, "dequantize output");
  SW_REQUIRE(out.writeable(), InvalidArgument, "dequantize output must be writeable");
  const Mxfp8ConstView src{{static_cast<const std::uint8_t*>(d.data), d.nbytes()},
                           {static_cast<const std::uint8_t*>(s.data), s.nbytes()},
                           rows,
                           cols,
                           scale_layout};
  py::gil_scoped_release released;
  dequantize_mxfp8_into(src, o);
}

}  // namespace

void bind_mxfp8(py::module_& m) {
  m.def("mxfp8_quantize", &quantize, py::arg("input"), py::arg("dtype"), py::arg("rows"),
        py::arg("cols"), py::arg("scale_rule"), py::arg("scale_layout"),
        "Quantizes a row-major [rows, cols] fp32/bf16/fp16 buffer; returns flat (data, scale)");
  m.def("mxfp8_dequantize", &dequantize, py::arg("data"), py::arg("scale"), py::arg("rows"),
        py::arg("cols"), py::arg("scale_layout"), py::arg("out"), py::arg("dtype"),
        "Dequantizes flat (data, scale) into the contiguous buffer `out` of dtype `dtype`");
  m.def(
      "mxfp8_scale_shape",
      [](std::int64_t rows, std::int64_t cols, const std::string& layout) {
        const Mxfp8ScaleLayout l = parse_layout(layout);
        const Mxfp8Geometry g = mxfp8_geometry(rows, cols, l);
        if (l == Mxfp8ScaleLayout::kRowMajor) return py::make_tuple(rows, g.blocks_per_row);
        // cuBLAS tiles: 128 rows x 4 blocks, zero padded (what `shardwise convert` writes).
        return py::make_tuple((rows + 127) / 128 * 128, (g.blocks_per_row + 3) / 4 * 4);
      },
      py::arg("rows"), py::arg("cols"), py::arg("scale_layout"),
      "Logical 2-D shape of the scale tensor of a [rows, cols] tensor");
}

}  // namespace shardwise::python
