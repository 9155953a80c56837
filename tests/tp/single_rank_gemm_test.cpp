// The overlapped GEMMs on a one-rank group (no mpirun): every algorithm is the plain GEMM, and
// bad shapes are reported naming the operand.
#include <gtest/gtest.h>

#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/tp/overlapped_gemm.hpp"

namespace shardwise::tp {
namespace {

TEST(SingleRankOverlappedGemm, EveryAlgorithmIsThePlainGemm) {
  auto world = init_mpi_world();
  ASSERT_EQ(world->size(), 1);
  // x [2, 3], w [2, 3]: y = x w^T.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> w = {1, 0, -1, 2, 1, 0};
  const std::vector<float> expected = {-2, 4, -2, 13};
  for (auto choice : {OverlapChoice{}, OverlapChoice{OverlapAlgorithm::kRingExchange, 1},
                      OverlapChoice{OverlapAlgorithm::kPipeline, 2}}) {
    std::vector<float> y(4), gathered(6), z(4);
    all_gather_gemm(*world, choice, {x.data(), 2, 3}, {{w.data(), 2, 3}, blas::Op::kTranspose},
                    {y.data(), 2, 2}, gathered.data());
    EXPECT_EQ(y, expected);
    EXPECT_EQ(gathered, x);
    gemm_reduce_scatter(*world, choice, {x.data(), 2, 3}, {{w.data(), 2, 3}, blas::Op::kTranspose},
                        {z.data(), 2, 2});
    EXPECT_EQ(z, expected);
  }
}

TEST(SingleRankOverlappedGemm, ShapeErrorsNameTheOperand) {
  auto world = init_mpi_world();
  std::vector<float> x(6), w(6), y(6);
  try {
    all_gather_gemm(*world, {}, {x.data(), 2, 3}, {{w.data(), 3, 2}, blas::Op::kTranspose},
                    {y.data(), 2, 3});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("all_gather_gemm: input has 3 columns but the weight's "
                                         "inner dimension is 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gemm_reduce_scatter(*world, {}, {x.data(), 2, 3},
                                   {{w.data(), 2, 3}, blas::Op::kTranspose}, {y.data(), 3, 2}),
               ShapeError);
  EXPECT_THROW(all_gather_gemm(*world, {OverlapAlgorithm::kPipeline, 0}, {x.data(), 2, 3},
                               {{w.data(), 2, 3}, blas::Op::kTranspose}, {y.data(), 2, 2}),
               InvalidArgument);
}

}  // namespace
}  // namespace shardwise::tp
