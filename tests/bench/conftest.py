"""The tiny benchmark suite, built once per module."""

import pytest

from labkit.bench import suite_tasks


SEED = suite_tasks("tiny")[1][0]


@pytest.fixture(scope="module")
def tiny():
    tasks, _ = suite_tasks("tiny")
    return {t.family: (t, t.build(SEED)) for t in tasks}
