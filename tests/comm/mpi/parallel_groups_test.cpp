// make_parallel_groups: members of every group (checked by gathering world ranks over the group)
// and collectives on the sub-groups. Expected members are written out for 4 ranks.
#include <gtest/gtest.h>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;

// World ranks of `group`'s members in group-rank order, learned by an all-gather over the group.
std::vector<int> gathered_members(const ProcessGroupPtr& group, int world_rank) {
  Buffer in(DType::kInt32, 1);
  testing_comm::store_integer(DType::kInt32, in.bytes.data(), 0, world_rank);
  Buffer out(DType::kInt32, group->size());
  group->all_gather(out.view(), in.view())->wait();
  std::vector<int> members(static_cast<std::size_t>(group->size()));
  std::memcpy(members.data(), out.bytes.data(), members.size() * sizeof(int));
  return members;
}

std::int64_t sum_of_world_ranks(const ProcessGroupPtr& group, int world_rank) {
  Buffer b(DType::kInt64, 1);
  testing_comm::store_integer(DType::kInt64, b.bytes.data(), 0, world_rank);
  group->all_reduce(b.view(), ReduceOp::kSum)->wait();
  std::int64_t v = 0;
  std::memcpy(&v, b.bytes.data(), 8);
  return v;
}

void expect_group(const ProcessGroupPtr& group, int world_rank, const std::vector<int>& members,
                  const char* what) {
  ASSERT_NE(group, nullptr) << what;
  EXPECT_EQ(group->size(), static_cast<int>(members.size())) << what;
  EXPECT_EQ(gathered_members(group, world_rank), members) << what;
  std::int64_t sum = 0;
  for (int m : members) sum += m;
  EXPECT_EQ(sum_of_world_ranks(group, world_rank), sum) << what;
}

class ParallelGroupsAt4 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (world->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  }
  ProcessGroupPtr world = init_mpi_world();
  int r = world->rank();
};

TEST_F(ParallelGroupsAt4, TensorParallel2) {
  const ParallelGroups g = make_parallel_groups(world, ParallelSizes{.tp = 2, .dp = 0});
  EXPECT_EQ(g.sizes.dp, 2);
  EXPECT_EQ(g.sizes.etp, 2);
  const int pair = r / 2 * 2;
  expect_group(g.tensor_parallel, r, {pair, pair + 1}, "tp");
  expect_group(g.data_parallel, r, {r % 2, r % 2 + 2}, "dp");
  expect_group(g.pipeline_parallel, r, {r}, "pp");
  expect_group(g.expert_parallel, r, {r}, "ep");
  // etp defaults to tp, so with ep = 1 expert-dp is the dp group and expert-tp the tp group.
  expect_group(g.expert_data_parallel, r, {r % 2, r % 2 + 2}, "edp");
  expect_group(g.expert_tensor_parallel, r, {pair, pair + 1}, "etp");
  EXPECT_EQ(g.tensor_parallel->rank(), r % 2);
  EXPECT_EQ(g.data_parallel->rank(), r / 2);
}

TEST_F(ParallelGroupsAt4, ExpertParallel2) {
  const ParallelGroups g = make_parallel_groups(world, ParallelSizes{.dp = 0, .ep = 2});
  EXPECT_EQ(g.sizes.dp, 4);
  expect_group(g.tensor_parallel, r, {r}, "tp");
  expect_group(g.data_parallel, r, {0, 1, 2, 3}, "dp");
  const int pair = r / 2 * 2;
  expect_group(g.expert_parallel, r, {pair, pair + 1}, "ep");
  expect_group(g.expert_data_parallel, r, {r % 2, r % 2 + 2}, "edp");
  expect_group(g.expert_tensor_parallel, r, {r}, "etp");
}

TEST_F(ParallelGroupsAt4, PipelineParallel2AndConcurrentSubgroupCollectives) {
  const ParallelGroups g = make_parallel_groups(world, ParallelSizes{.pp = 2, .dp = 0});
  expect_group(g.pipeline_parallel, r, {r % 2, r % 2 + 2}, "pp");
  expect_group(g.data_parallel, r, {r / 2 * 2, r / 2 * 2 + 1}, "dp");
  // Operations on different groups run on different workers and may overlap.
  Buffer a = testing_comm::rank_data(DType::kFloat32, 1000, r, 4096);
  Buffer b = testing_comm::rank_data(DType::kFloat32, 1001, r, 4096);
  WorkPtr wa = g.pipeline_parallel->all_reduce(a.view(), ReduceOp::kMax);
  WorkPtr wb = g.data_parallel->all_reduce(b.view(), ReduceOp::kMax);
  wb->wait();
  wa->wait();
  for (std::int64_t i = 0; i < 4096; ++i) {
    float got = 0;
    std::memcpy(&got, a.bytes.data() + 4 * i, 4);
    const double want = std::max(testing_comm::value_at(DType::kFloat32, 1000, r % 2, i),
                                 testing_comm::value_at(DType::kFloat32, 1000, r % 2 + 2, i));
    ASSERT_EQ(got, static_cast<float>(want)) << i;
  }
}

TEST(ParallelGroups, SizesThatDoNotDivideRaiseOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  try {
    make_parallel_groups(world, ParallelSizes{.tp = p + 1, .dp = 0});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tp (" + std::to_string(p + 1) + ")"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_parallel_groups(world, ParallelSizes{.dp = p + 1}), InvalidArgument);
  EXPECT_THROW(make_parallel_groups(world, ParallelSizes{.dp = 0, .ep = 3 * p}), InvalidArgument);
  world->barrier()->wait();  // nothing collective was started by the failed calls
}

TEST(ParallelGroups, WholeWorldAsDataParallel) {
  ProcessGroupPtr world = init_mpi_world();
  const ParallelGroups g = make_parallel_groups(world, ParallelSizes{.dp = 0});
  std::vector<int> all(static_cast<std::size_t>(world->size()));
  for (int i = 0; i < world->size(); ++i) all[static_cast<std::size_t>(i)] = i;
  expect_group(g.data_parallel, world->rank(), all, "dp");
  expect_group(g.tensor_parallel, world->rank(), {world->rank()}, "tp");
}

}  // namespace
}  // namespace shardwise
