"""The check that a lesson's panel builder (which calls labkit.viz.credit_panels) returns the panels
built directly from the estimators and the truth: the same titles in the same order, the same
tensors bit for bit.
"""
from __future__ import annotations

import torch


def assert_same_panels(new: dict, old: dict) -> None:
    assert list(new) == list(old)
    for title in old:
        assert new[title].dtype == old[title].dtype, title
        assert torch.equal(new[title], old[title]), title
