"""Shared test fixtures."""
import pytest
import torch


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


@pytest.fixture(scope="session")
def torch_is_locked() -> bool:
    """Whether this torch is the lock's (requirements.lock). Sampled episodes, and so anything
    cached from a sampled run, reproduce bit for bit only under it: another torch version draws
    other random streams (the other-end environment runs torch 2.6)."""
    from pathlib import Path

    import torch

    lock = Path(__file__).resolve().parents[1] / "requirements.lock"
    if not lock.is_file():
        return False
    pins = dict(line.split("==", 1) for line in lock.read_text().splitlines() if "==" in line)
    return torch.__version__.split("+")[0] == pins.get("torch")
