// check_settings_agree: ranks whose settings differ all raise ConfigError naming the first setting
// that differs, also when the difference changes how many settings there are (a list longer on
// one rank, a key only one rank has), which named no setting before.
#include "shardwise/comm/settings_agreement.hpp"

#include <gtest/gtest.h>

#include <string>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using Json = nlohmann::ordered_json;

Json base_settings() {
  return Json{{"training", {{"steps", 10}, {"lr", 0.001}}}, {"model", {{"dims", {4, 8}}}}};
}

// The message every rank raises when `settings` (this rank's) differ somewhere.
std::string settings_error(ProcessGroup& world, const Json& settings) {
  try {
    check_settings_agree(world, settings);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SettingsAgreement, EqualSettingsPass) {
  ProcessGroupPtr world = init_mpi_world();
  EXPECT_NO_THROW(check_settings_agree(*world, base_settings()));
}

TEST(SettingsAgreement, AValueOnOneRankIsNamedWithItsKey) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int odd_one = world->size() - 1;
  Json mine = base_settings();
  if (world->rank() == odd_one) mine["training"]["lr"] = 0.01;
  const std::string msg = settings_error(*world, mine);
  EXPECT_NE(msg.find("runs with training.lr = "), std::string::npos) << msg;
  EXPECT_NE(msg.find("disagreeing rank(s) " + std::to_string(odd_one)), std::string::npos) << msg;
}

TEST(SettingsAgreement, ALongerListOnOneRankNamesItsFirstExtraElement) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int odd_one = world->size() - 1;
  Json mine = base_settings();
  if (world->rank() == odd_one) mine["model"]["dims"].push_back(16);
  const std::string msg = settings_error(*world, mine);
  ASSERT_FALSE(msg.empty()) << "rank " << world->rank() << " did not raise";
  if (world->rank() == odd_one) {
    EXPECT_NE(msg.find("has settings other ranks lack, from model.dims[2]"), std::string::npos)
        << msg;
  } else {
    EXPECT_NE(msg.find("lacks settings other ranks have, after its last, model.dims[1]"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(msg.find("differ in shape"), std::string::npos) << msg;
}

// sw.Muon on one rank and sw.AdamW on another: {"optimizer", then each class's own keywords}. The
// first difference is a value, before the counts part.
TEST(SettingsAgreement, AValueBeforeTheCountsPartIsNamedWithItsKey) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int odd_one = world->size() - 1;
  Json mine = base_settings();
  if (world->rank() == odd_one) {
    mine["training"]["steps"] = 11;
    mine["model"]["dims"].push_back(16);
  }
  const std::string msg = settings_error(*world, mine);
  const std::string value = world->rank() == odd_one ? "11" : "10";
  EXPECT_NE(msg.find("runs with training.steps = " + value +
                     ", and not every rank does "
                     "(disagreeing rank(s) " +
                     std::to_string(odd_one)),
            std::string::npos)
      << msg;
}

TEST(SettingsAgreement, AKeyOnlyOneRankHasIsNamed) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int odd_one = world->size() - 1;
  Json mine = base_settings();
  if (world->rank() == odd_one) {
    mine = Json{{"training", {{"steps", 10}, {"warmup", 3}, {"lr", 0.001}}},
                {"model", {{"dims", {4, 8}}}}};
  }
  const std::string msg = settings_error(*world, mine);
  ASSERT_FALSE(msg.empty()) << "rank " << world->rank() << " did not raise";
  // Rank odd_one's second setting is training.warmup where the others have training.lr.
  const std::string expected =
      world->rank() == odd_one ? "has the setting training.warmup" : "has the setting training.lr";
  EXPECT_NE(msg.find(expected + " where not every rank has it (disagreeing rank(s) " +
                     std::to_string(odd_one)),
            std::string::npos)
      << msg;
  // The group is still usable afterwards.
  EXPECT_NO_THROW(check_settings_agree(*world, base_settings()));
}

}  // namespace
}  // namespace shardwise
