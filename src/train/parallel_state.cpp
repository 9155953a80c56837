// Trainer step 1: what this rank is in the run (see training_run.hpp).
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {

RunContext build_parallel_state(const TrainingConfig& config, const ProcessGroupPtr& world,
                                const TrainerOptions& options) {
  RunContext run;
  run.config = config;
  const ParallelConfig& parallel = run.config.parallel;
  SW_REQUIRE(parallel.pp == 1 && parallel.cp == 1, ConfigError,
             "the reference trainer runs data and tensor parallelism only: parallel.pp and "
             "parallel.cp must be 1 (got ",
             parallel.pp, ", ", parallel.cp, ")");
  // ep sizes the expert-parallel groups; the reference GPT has no experts (it was ignored).
  SW_REQUIRE(parallel.ep == 1, ConfigError, "parallel.ep = ", parallel.ep,
             ": the reference GPT has no experts, so expert parallelism must be 1");
  SW_REQUIRE(world->size() % parallel.tp == 0, ConfigError, "parallel.tp (", parallel.tp,
             ") must divide the number of ranks (", world->size(), ")");
  SW_REQUIRE(!parallel.sequence_parallel || parallel.tp > 1, ConfigError,
             "parallel.sequence_parallel needs tensor parallelism (parallel.tp > 1)");
  SW_REQUIRE(config.model.dtype == DType::kFloat32, ConfigError,
             "model.dtype: the CPU reference model trains in fp32 (got ",
             dtype_name(config.model.dtype), ")");
  if (config.training.device != TrainingDevice::kCpu) {
    // What the device path builds: the layer-wise chain (Muon + AdamW) over one device per rank.
    SW_REQUIRE(parallel.tp == 1, ConfigError,
               "training.device: ", to_string(config.training.device),
               " trains with data parallelism only: parallel.tp must be 1 (got ", parallel.tp, ")");
    SW_REQUIRE(config.optimizer.kind == OptimizerKind::kLayerWise, ConfigError,
               "training.device: ", to_string(config.training.device), " runs optimizer.kind '",
               to_string(OptimizerKind::kLayerWise), "' only (got '",
               to_string(config.optimizer.kind), "')");
  }
  // The communication-overlap config decides the data-parallel settings (user values win).
  run.resolution = resolve_comm_overlap(run.config, world->size());
  if (options.overlap_param_gather_with_optimizer_step) {
    run.config.optimizer.overlap_param_gather_with_optimizer_step =
        *options.overlap_param_gather_with_optimizer_step;
  }
  // TP groups of tp consecutive ranks, DP groups across them (dp = world / tp).
  run.groups = make_parallel_groups(world, ParallelSizes{parallel.tp, 1, 0, parallel.ep});
  run.tp = run.tp_group().size();
  run.tp_rank = run.tp_group().rank();
  run.world_size = world->size();
  run.dp = run.dp_group().size();
  run.rank = run.dp_group().rank();
  run.is_rank0 = world->rank() == 0;
  run.verbose = run.is_rank0 && !options.quiet;
  run.progress = options.progress;
  run.jsonl = !options.log_jsonl.empty() ? options.log_jsonl : run.config.logging.jsonl_path;
  run.plot = !options.plot.empty() ? options.plot : run.config.logging.plot_path;
  const TrainLoopConfig& t = run.config.training;
  run.global_batch =
      checked_product<ConfigError>({{"training.micro_batch_size", t.micro_batch_size},
                                    {"training.grad_accumulation", t.grad_accumulation},
                                    {"data-parallel size", run.dp}},
                                   kMaxSampleIndex, "global batch");
  // The sample index (trainer.consumed_samples) of the last step must stay exact.
  checked_product<ConfigError>({{"training.steps", t.steps}, {"global batch", run.global_batch}},
                               kMaxSampleIndex, "samples the run would consume");
  return run;
}

}  // namespace shardwise::train_detail
