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
