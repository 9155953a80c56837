"""Checkpoints move between shardwise.torch and `shardwise train`: the example GPT trained from
Python at dp=4 and saved at step 6 resumes in the CLI at dp=2 with the losses the Python run went
on to have; a CLI checkpoint (dp=2) resumes in Python at dp=1 with the CLI's losses. Same global
batch (64) and schedule on both sides."""

import json
import subprocess

import pytest

from conftest import BUILD, REPO, launcher_env, run_mpi

STEPS, SAVE_AT = 12, 6
SCHEDULE = ["--steps", STEPS, "--warmup-steps", 4, "--eval-interval", 0, "--log-interval", 0]
CLI_OVERRIDES = [f"training.steps={STEPS}", "training.warmup_steps=4", "training.eval_interval=0",
                 "logging.progress=false", f"logging.log_interval={STEPS}"]


def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}


def run_cli(np_ranks, *args):
    command = ["mpirun", "-np", str(np_ranks), "--oversubscribe", str(BUILD / "bin" / "shardwise"),
               "train", "--config", str(REPO / "examples" / "default.yaml"), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, env=launcher_env(), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def assert_same_losses(resumed, reference):
    assert sorted(resumed) == list(range(SAVE_AT + 1, STEPS + 1))
    for step, loss in resumed.items():
        assert loss == pytest.approx(reference[step], rel=1e-5), f"step {step}"


def test_python_checkpoint_resumes_in_cli_at_another_dp(tmp_path):
    example = REPO / "examples" / "torch" / "train_gpt.py"
    done = run_mpi(4, example, *SCHEDULE, "--save", tmp_path / "py", "--save-interval", SAVE_AT,
                   "--log-jsonl", tmp_path / "py.jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "py" / "step-0000006" / "checkpoint.json").read_text())
    assert manifest["step"] == SAVE_AT
    run_cli(2, *CLI_OVERRIDES, "training.micro_batch_size=32",
            "--load", tmp_path / "py" / "step-0000006", "--log-jsonl", tmp_path / "cli.jsonl")
    assert_same_losses(losses(tmp_path / "cli.jsonl"), losses(tmp_path / "py.jsonl"))


def test_cli_checkpoint_resumes_in_python(tmp_path):
    run_cli(2, *CLI_OVERRIDES, "training.micro_batch_size=32", "--save", tmp_path / "cli",
            "--save-interval", SAVE_AT, "--log-jsonl", tmp_path / "cli.jsonl")
    example = REPO / "examples" / "torch" / "train_gpt.py"
    done = run_mpi(1, example, *SCHEDULE, "--micro-batch-size", 64,
                   "--load", tmp_path / "cli" / "step-0000006", "--log-jsonl", tmp_path / "py.jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resumed from" in done.stdout and "at step 6" in done.stdout
    assert_same_losses(losses(tmp_path / "py.jsonl"), losses(tmp_path / "cli.jsonl"))
