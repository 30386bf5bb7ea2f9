"""The decision tree's drawing (labkit.viz.tree)."""
from __future__ import annotations

import pytest

from labkit import survey
from labkit.viz.tree import tree_chart


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
