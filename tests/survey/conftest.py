"""The shipped inventory, loaded once per module."""
from __future__ import annotations

import pandas as pd
import pytest

from labkit.survey import load_baselines, load_methods


@pytest.fixture(scope="module")
def methods() -> pd.DataFrame:
    return load_methods()


@pytest.fixture(scope="module")
def baselines() -> pd.DataFrame:
    return load_baselines()
