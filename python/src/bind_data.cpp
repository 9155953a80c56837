// The built-in synthetic tasks (the data `shardwise train` uses), so Python examples train on
// exactly the same samples as the CLI.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/synthetic_task.hpp"

namespace py = pybind11;

namespace shardwise::python {

void bind_data(py::module_& m) {
  py::class_<SyntheticTaskDataset>(m, "SyntheticTask",
                                   "Addition / sort task samples addressed by global index")
      .def(py::init([](const std::string& task, int digits, std::uint64_t seed,
                       std::int64_t eval_samples) {
             SW_REQUIRE(task == "addition" || task == "sort", InvalidArgument,
                        "task: expected 'addition' or 'sort', got '", task, "'");
             SW_REQUIRE(digits >= 1, InvalidArgument, "digits must be >= 1, got ", digits);
             return SyntheticTaskDataset(
                 task == "addition" ? SyntheticTaskKind::kAddition : SyntheticTaskKind::kSort,
                 digits, seed, eval_samples);
           }),
           py::arg("task") = "addition", py::arg("digits") = 3, py::arg("seed") = 1234,
           py::arg("eval_samples") = 256)
      .def_property_readonly("vocab_size", &SyntheticTaskDataset::vocab_size)
      .def_property_readonly("seq_len", &SyntheticTaskDataset::seq_len)
      .def_property_readonly("validation_size", &SyntheticTaskDataset::validation_size)
      .def("describe", &SyntheticTaskDataset::describe)
      .def(
          "sample_text",
          [](const SyntheticTaskDataset& d, bool validation, std::int64_t index) {
            return d.sample_text(validation ? Split::kValidation : Split::kTrain, index);
          },
          py::arg("validation"), py::arg("index"))
      .def(
          "fill",
          [](const SyntheticTaskDataset& d, bool validation, std::int64_t first, int count) {
            SW_REQUIRE(count >= 1 && first >= 0, InvalidArgument,
                       "fill: need count >= 1 and "
                       "first >= 0, got count ",
                       count, ", first ", first);
            const py::ssize_t seq = d.seq_len();
            py::array_t<std::int32_t> tokens({py::ssize_t{count}, seq});
            py::array_t<std::int32_t> targets({py::ssize_t{count}, seq});
            d.fill(validation ? Split::kValidation : Split::kTrain, first, count,
                   tokens.mutable_data(), targets.mutable_data());
            return py::make_tuple(tokens, targets);
          },
          py::arg("validation"), py::arg("first"), py::arg("count"),
          "Samples [first, first + count): (tokens, targets) int32 [count, seq_len]; targets < 0 "
          "are not scored");
}

}  // namespace shardwise::python
