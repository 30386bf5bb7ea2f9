"""The heatmap notebooks 02, 03, 04 and 09 share (labkit.course.step_heatmaps): credit panels on
the tiny LM's reference rollouts, padding not drawn, each first wrong step outlined. Where the
first wrong step is (``first_error_positions``) is tested in scoring/test_steps.py."""
import pytest

from labkit.course.step_heatmaps import wrong_step_heatmaps
from labkit.envs.arithmetic.truth import load_reference, truth_step_advantage


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def outline_marks(spec: dict) -> list[set[tuple[str, int]]]:
    """Per panel of a compare_heatmaps spec, the (row label, position) cells its outline layer
    draws: the rows of the panel's data that pass the layer's filter."""
    marks = []
    for panel in spec["vconcat"]:
        data = spec["datasets"][panel["data"]["name"]]
        outlines = [l for l in panel["layer"] if l["mark"]["type"] == "rect" and l["mark"].get("fill", "x") is None]
        drawn = set()
        for layer in outlines:
            (rule,) = [t["filter"] for t in layer["transform"]]
            drawn |= {(r["row"], r["pos"]) for r in data if r.get(rule["field"]) == rule["equal"]}
        marks.append(drawn)
    return marks


@pytest.mark.parametrize("shown", ["wrong_then_two_right", "first_four", "notebook_09"])
def test_wrong_step_heatmaps_outline_only_the_first_wrong_steps(reference, shown):
    """The rows the notebooks show (the rollouts with a wrong step plus two correct ones; the
    first four; notebook 09's four): the outline layer marks exactly the generated positions of
    each first wrong step, in every panel; nothing on a rollout whose steps are all right (its
    padding's step id and its first_error_step are both -1), no padding drawn, and <eos> drawn as
    one symbol."""
    first = reference.truth["first_error_step"]
    failed = (first >= 0).nonzero().flatten().tolist()
    rows = {"wrong_then_two_right": failed + [b for b in range(len(reference)) if b not in failed][:2],
            "first_four": list(range(4)), "notebook_09": [0, 7, 13, 28]}[shown]
    truth = truth_step_advantage(reference)
    spec = wrong_step_heatmaps(reference, {"truth": truth[rows], "minus": -truth[rows]}, rows,
                               shared_scale=False, cell_size=16).to_dict()
    label = {b: f"#{b} R={reference.scores[b]:.0f}" for b in rows}
    want = {(label[b], t) for b in rows if first[b] >= 0
            for t in range(reference.horizon) if reference.mask[b, t] and reference.step_ids[b, t] == first[b]}
    assert want and any(first[b] < 0 and not reference.mask[b].all() for b in rows)  # the case that failed
    for marks, panel in zip(outline_marks(spec), spec["vconcat"]):
        assert marks == want
        data = spec["datasets"][panel["data"]["name"]]
        assert len(data) == int(reference.mask[rows].sum())  # padding is not drawn
        assert {r["row"] for r in data} == set(label.values())  # rows labelled "#b R=outcome"
        assert not {m[0] for m in marks} & {label[b] for b in rows if first[b] < 0}
        eos = [r for r in data if r["token"] == "<eos>"]
        assert len(eos) == len(rows) and {r["text"] for r in eos} == {"\u25a0"}


def test_wrong_step_heatmaps_reject_rows_and_rollouts_they_cannot_draw(reference):
    truth = truth_step_advantage(reference)
    with pytest.raises(ValueError, match="^rows"):
        wrong_step_heatmaps(reference, {"truth": truth[:1]}, [])
    with pytest.raises(ValueError, match="^rows"):
        wrong_step_heatmaps(reference, {"truth": truth[:1]}, [len(reference)])
    with pytest.raises(ValueError, match="^rollouts"):
        wrong_step_heatmaps(reference.with_(text=None), {"truth": truth[:1]}, [0])
