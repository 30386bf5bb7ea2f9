"""Every cache shipped in data/ carries a stamp that holds (labkit.core.cache), and every loader reads
its shipped cache.
"""

import pytest

from labkit.core import cache
from labkit.core.paths import data_path


# every cache a script writes to data/, the script that writes it and the files its loader needs
SHIPPED = [("lm_truth", "reference.json", "build_lm_truth.py", ["reference.safetensors"]),
           ("lm_truth", "alternatives.json", "build_step_alternatives.py", ["alternatives.safetensors"]),
           ("rl_runs", "meta.json", "build_rl_runs.py", ["curves.csv"]),
           ("rl_runs", "lr_sweep_meta.json", "build_rl_lr_sweep.py", ["lr_sweep.csv"]),
           ("vine_hits", "meta.json", "build_vine_hits.py", ["hits.csv"]),
           ("capstone_grpo", "meta.json", "build_capstone_grpo.py", ["curve.csv", "logprobs.csv"]),
           ("family_hits", "meta.json", "build_family_hits.py", ["hits.csv"]),
           ("echo_trap", "meta.json", "build_echo_trap.py", ["final.csv", "curves.csv", "exact_ascent.csv",
                                                              "loss_direction.csv"]),
           ("pure_padding", "static.json", "build_pure_padding.py", []),
           ("pure_padding", "rl_it24_lr1e-05_vw0.json", "build_pure_padding.py", ["rl_it24_lr1e-05_vw0.csv"]),
           ("pure_padding", "rl_it40_lr3e-05_vw0.json", "build_pure_padding.py", ["rl_it40_lr3e-05_vw0.csv"]),
           ("offpolicy_irl", "meta.json", "build_offpolicy_irl.py", ["sorl_summary.csv", "sorl_check.csv",
                                                                      "step_agent_curves.csv"]),
           ("loss_runs", "meta.json", "build_loss_runs.py", ["curves.csv"]),
           ("later_credits", "meta.json", "build_later_credits.py", ["credits.safetensors", "credits.json"]),
           ("per_turn", "meta.json", "build_per_turn_bias.py", ["bias.csv"]),
           ("schedules", "meta.json", "build_schedules.py", ["curves.csv", "summary.csv", "hacking.csv",
                                                              "credit_scores.csv"]),
           ("sample_rollouts", "meta.json", "build_sample_rollouts.py", ["arithmetic_lm.jsonl", "toolworld.jsonl"]),
           ("qval", "meta.json", "build_qval.py", ["cells.csv", "agreement.csv"]),
           ("bench/full", "meta.json", "build_bench_full.py", ["records.jsonl", "records.csv"]),
           ("bench/frontier", "meta.json", "build_frontier.py", ["frontier.csv", "crossover.csv"]),
           ("bench/frontier_shared", "meta.json", "build_frontier.py",
            ["frontier.csv", "crossover.csv", "time_to_success.csv"]),
           ("tiny_lm", "train_log.json", "train_tiny_lm.py", ["model.safetensors"]),
           ("reward_models", "train_log.json", "train_reward_models.py", ["prm.safetensors", "orm.safetensors"]),
           ("implicit_lm", "train_log.json", "train_implicit_lm.py", ["dpo_model.safetensors", "treg_model.safetensors"])]


@pytest.mark.parametrize("folder,meta,script,files", SHIPPED, ids=[f"{f}/{m}" for f, m, _, _ in SHIPPED])
def test_every_shipped_cache_is_stamped_and_current(folder, meta, script, files):
    found, _ = cache.read_cache(data_path(*folder.split("/")), script=script, meta=meta, files=files)
    command = cache.rebuild_command(found["provenance"]["script"], found["provenance"]["args"])
    assert command.startswith(f"python scripts/{script}")


def test_every_loader_reads_its_shipped_cache():
    from labkit.bench.frontier import SHARED_FRONTIER_DIR, load_frontier
    from labkit.bench.qval import load_qval
    from labkit.course import nb03_vineppo, nb04_process_rewards, nb05_why_agents_harder
    from labkit.course import gigpo_runs, nb06_gigpo, nb08_hindsight_counterfactual, nb10_benchmark
    from labkit.learn.reward_models import load_train_log

    assert len(nb03_vineppo.load_vine_hits()[0]) and len(nb03_vineppo.load_rl_runs()[0])
    assert len(nb03_vineppo.load_lr_sweep()[0]) and len(nb04_process_rewards.load_padding()[0])
    assert len(nb04_process_rewards.load_padding_rl()[0]) and nb04_process_rewards.implicit_training_log()
    assert len(nb04_process_rewards.load_family_hits()[0])
    assert len(nb04_process_rewards.load_later_credits()) == 14
    assert set(nb05_why_agents_harder.load_echo_trap()) == {"final", "curves", "exact_ascent", "loss_direction",
                                                            "meta"}
    assert len(nb06_gigpo.load_per_turn_bias()[0])
    assert len(gigpo_runs.load_loss_runs()[0].groupby(["family", "setting"])) == len(gigpo_runs.loss_settings())
    assert len(nb08_hindsight_counterfactual.load_offpolicy_results()["sorl"])
    assert len(nb08_hindsight_counterfactual.load_schedule_results()["curves"])
    assert len(nb10_benchmark.load_full_run()[0]) and len(load_frontier()[0]) and load_train_log()["evaluation"]
    assert set(load_frontier(SHARED_FRONTIER_DIR)[0].world) == {"chain_shared"}
    assert len(load_qval()[0]) and len(load_qval()[1])
