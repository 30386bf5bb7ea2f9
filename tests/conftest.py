"""Fixtures every test folder may use, and the session's torch settings.

The unit tests run on one torch thread (and any process they start on one OpenMP thread): their
tensors are small, and threads waiting on each other were measured to slow tiny batches down up
to 50x when other processes share the CPU.
"""
import os

import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tiny-model tests on one torch thread, restoring the setting afterwards.

    Small matrices gain nothing from a second thread, and when other processes share the CPU
    OpenMP threads waiting on each other were measured to slow tiny batches down up to 50x.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def lm_env():
    """The shipped tiny model in its task environment, loaded once per test module."""
    from labkit.envs.arithmetic.lm import ArithmeticLM

    return ArithmeticLM.load()


@pytest.fixture(scope="module")
def lm_ref():
    """The shipped tiny model in its task environment and its cached reference rollouts."""
    from labkit.envs.arithmetic.lm import ArithmeticLM
    from labkit.envs.arithmetic.truth import load_reference

    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    return env, ref


@pytest.fixture(scope="module")
def noisy_toolworld():
    """A small ToolWorld with misleading search, noisy reads and flaky tests: the world, a scripted
    policy, its exact truth and 24 sampled trajectories (6 tasks x 4)."""
    from labkit.envs import ToolWorld

    env = ToolWorld(3, max_turns=8, mislead=0.3, noise=0.3, flaky=0.3)
    policy = env.scripted_policy(1.5)
    truth = env.truth(policy)
    ro = env.sample(policy, 6, group_size=4, seed=0)
    return env, policy, truth, ro


SAMPLES = ("arithmetic_lm.jsonl", "toolworld.jsonl")


def _with_string_groups(ro):
    """The same batch with string group ids whose first-appearance order differs from the codes'."""
    n = int(ro.group_ids.max()) + 1
    return ro.with_(info={**ro.info, "group_names": tuple(f"task-{(n - 1 - g) * 7}" for g in range(n))})


@pytest.fixture(scope="module", params=[(s, f, g) for s in SAMPLES for f in ("jsonl", "parquet")
                                        for g in ("int", "str")],
                ids=lambda p: "-".join(p))
def sample_file(request, tmp_path_factory):
    """A shipped sample as a file: the shipped JSONL itself, or a copy (Parquet; string ids)."""
    from labkit.core.paths import data_path
    from labkit.io import read_rollouts, write_rollouts

    name, fmt, groups = request.param
    path = data_path("sample_rollouts", name)
    if fmt == "jsonl" and groups == "int":
        return path
    ro = read_rollouts(path)
    if groups == "str":
        ro = _with_string_groups(ro)
    return write_rollouts(ro, tmp_path_factory.mktemp("dump") / f"{name.split('.')[0]}.{fmt}")


@pytest.fixture(scope="session")
def torch_is_locked() -> bool:
    """Whether this torch is the lock's (``torch_lock.torch_is_locked``)."""
    from torch_lock import torch_is_locked as locked

    return locked()
