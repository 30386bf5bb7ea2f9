"""How far a measured rate could move (labkit.scoring.intervals): the Wilson interval, a table of
them per method, and the paired bootstrap interval of a difference."""
import pandas as pd
import pytest

from labkit.scoring import hit_rate_intervals, paired_difference, wilson_interval


def test_wilson_interval_brackets_the_rate_and_narrows_with_n():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0 and hi == pytest.approx(1.96 ** 2 / (10 + 1.96 ** 2), abs=1e-3)  # the closed form at p = 0
    lo, hi = wilson_interval(10, 10)
    assert hi == 1 and lo < 1
    small, big = wilson_interval(4, 8), wilson_interval(40, 80)
    assert small[0] < 0.5 < small[1] and small[0] < big[0] < 0.5 < big[1] < small[1]
    assert wilson_interval(40, 80, level=0.5)[1] < big[1]
    with pytest.raises(ValueError, match="^successes"):
        wilson_interval(9, 8)
    with pytest.raises(ValueError, match="^n"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="^level"):
        wilson_interval(1, 8, level=1.0)


def test_hit_rate_intervals_and_paired_difference():
    a = pd.DataFrame({"row": range(40), "hit": [1.0, 0.0, 1.0, 0.5] * 10, "chance": 0.25})
    b = a.assign(hit=[0.25] * 40)
    table = hit_rate_intervals({"a": a, "b": b}).set_index("method")
    assert table.loc["a", "hit_rate"] == pytest.approx(0.625) and table.loc["a", "rollouts"] == 40
    assert table.loc["a", "low"] < 0.625 < table.loc["a", "high"]
    d = paired_difference(a, b, n_boot=2000, seed=1)
    assert d["diff"] == pytest.approx(0.375) and d["low"] < 0.375 < d["high"] and d["rollouts"] == 40
    assert d == paired_difference(a, b, n_boot=2000, seed=1)  # seeded
    same = paired_difference(a, a)
    assert same["diff"] == same["low"] == same["high"] == 0
    shifted = paired_difference(a.assign(hit=a.hit + 0.1), a)  # paired: a constant shift has no spread
    assert shifted["low"] == pytest.approx(0.1) and shifted["high"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="^b"):
        paired_difference(a, b.iloc[::-1])
    with pytest.raises(ValueError, match="^hits"):
        hit_rate_intervals({})


def test_difference_interval_of_independent_runs():
    from labkit.scoring import difference_interval

    a, b = [0.9, 0.95, 1.0, 0.85, 0.9], [0.5, 0.6, 0.55, 0.4, 0.45]
    d = difference_interval(a, b)
    assert d["diff"] == pytest.approx(0.92 - 0.5) and (d["n_a"], d["n_b"]) == (5, 5)
    assert 0 < d["low"] < d["diff"] < d["high"] and d == difference_interval(a, b)   # seeded
    # one run per side, or no spread: the interval is the difference itself
    assert difference_interval([0.7], [0.2])["low"] == pytest.approx(0.5)
    assert difference_interval([1.0] * 4, [1.0] * 3) == {"diff": 0.0, "low": 0.0, "high": 0.0, "n_a": 4, "n_b": 3}
    # a spread-out side widens it; a wider level too; samples of different sizes are fine
    wide = difference_interval([0.0, 1.0, 0.9, 0.95, 1.0], b)
    assert wide["high"] - wide["low"] > d["high"] - d["low"] and wide["low"] < 0 < wide["high"]
    assert difference_interval(a, b, level=0.5)["high"] < d["high"]
    assert difference_interval(a, b[:3])["n_b"] == 3
    for kwargs, name in (({"a": [], "b": b}, "a"), ({"a": a, "b": [0.1, float("nan")]}, "b"),
                         ({"a": a, "b": b, "level": 1.0}, "level"), ({"a": a, "b": b, "n_boot": 0}, "n_boot")):
        with pytest.raises(ValueError, match=f"^{name}:"):
            difference_interval(**kwargs)


def test_mean_interval_of_independent_runs():
    from labkit.scoring import mean_interval

    m = mean_interval([0.9, 0.95, 1.0, 0.85, 0.9])
    assert m["mean"] == pytest.approx(0.92) and m["n"] == 5 and m["low"] < 0.92 < m["high"]
    assert mean_interval([0.4] * 3) == pytest.approx({"mean": 0.4, "low": 0.4, "high": 0.4, "n": 3})
    assert mean_interval([0.9, 0.95, 1.0, 0.85, 0.9], level=0.5)["high"] < m["high"]
    for kwargs, name in (({"values": []}, "values"), ({"values": [0.1, float("nan")]}, "values"),
                         ({"values": [1.0], "level": 0.0}, "level"), ({"values": [1.0], "n_boot": 0}, "n_boot")):
        with pytest.raises(ValueError, match=f"^{name}:"):
            mean_interval(**kwargs)
