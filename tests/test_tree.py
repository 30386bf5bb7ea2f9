import pytest

from labkit import survey
from labkit.viz.tree import tree_chart


@pytest.mark.parametrize("leaf", sorted(survey.LEAVES))
def test_path_to_each_leaf_is_connected(leaf):
    nodes, edges = survey.decision_tree_graph(leaf)
    active = set(nodes.id[nodes.active])
    assert leaf in active and "length" in active
    # the lit edges form a chain from the root to the leaf: one fewer than the lit nodes
    lit = edges[edges.active]
    assert len(lit) == len(active) - 1
    assert set(lit.source) | set(lit.target) == active


def test_recommendation_leaf_matches_graph_path():
    rec = survey.recommend(150_000, "outcome", True, False, True)
    nodes, _ = survey.decision_tree_graph(rec.leaf)
    assert set(nodes.id[nodes.active]) == {"length", "replay", "privileged", "agentic/privileged"}


def test_no_leaf_lights_nothing_and_bad_leaf_is_named():
    nodes, edges = survey.decision_tree_graph(None)
    assert not nodes.active.any() and not edges.active.any()
    with pytest.raises(ValueError, match="leaf"):
        survey.decision_tree_graph("agentic/magic")


def test_tree_chart_colours_the_path():
    nodes, edges = survey.decision_tree_graph("hybrid/stochastic")
    spec = tree_chart(nodes, edges, title="x").to_dict()
    layers = spec["layer"]
    assert len(layers) == 5
    datasets = spec["datasets"].values()
    active_edges = [row for rows in datasets for row in rows if "x2" in row and row["active"]]
    assert {(r["source"], r["target"]) for r in active_edges} == {("length", "stochastic"),
                                                                 ("stochastic", "hybrid/stochastic")}
    with pytest.raises(ValueError):
        tree_chart(nodes.drop(columns="x"), edges)
