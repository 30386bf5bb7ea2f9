"""The decision tree (labkit.survey.decision_tree): recommend(), the tree spec and its graph."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis import given, settings

from labkit import survey
from labkit.survey import LEAVES, QUESTIONS, ROOT, load_baselines, load_methods, recommend


@pytest.fixture(scope="module")
def inventory_names() -> set[str]:
    return _inventory_names_cached()


@pytest.mark.parametrize("args, leaf, method_class", [
    ((5_000, "outcome", False, True), "reasoning/outcome", "GRPO / group-relative baseline"),
    ((5_000, "per_step", False, True), "reasoning/per_step",
     "Process reward model (step-level rewards)"),
    ((60_000, "outcome", False, True), "hybrid/deterministic",
     "VinePPO / segment-level Monte Carlo"),
    ((60_000, "outcome", True, True), "hybrid/stochastic", "PPO + trained value model"),
    ((300_000, "outcome", True, True), "agentic/replay", "Hindsight / counterfactual analysis"),
    ((300_000, "outcome", True, False, True), "agentic/privileged",
     "Privileged asymmetric critic"),
    ((300_000, "outcome", True, False, False), "agentic/online", "Turn-level MDP reformulation"),
])
def test_each_leaf(args, leaf, method_class, inventory_names):
    rec = recommend(*args)
    assert rec.leaf == leaf
    assert rec.method_class == method_class == LEAVES[leaf].method_class
    assert rec.regime == leaf.split("/")[0]
    assert rec.candidates and set(rec.candidates) <= inventory_names
    assert rec.rationale == LEAVES[leaf].rationale
    assert rec.path[0][0].startswith("How many tokens")


def test_leaf_candidates_match_table_8():
    assert "GiGPO" in LEAVES["agentic/online"].candidates        # tool-use row
    assert "Turn-PPO" in LEAVES["agentic/online"].candidates
    assert "SWEET-RL" in LEAVES["agentic/privileged"].candidates  # web-navigation row
    assert {"HCAPO", "C3", "CCPO"} <= set(LEAVES["agentic/replay"].candidates)  # SWE row
    # hindsight needs no replay: HCAPO is offered where there is none, and the departure is said
    assert "HCAPO" in recommend(300_000, "outcome", True, False).candidates
    assert any("needs no re-execution" in c for c in recommend(300_000, "outcome", True, False).caveats)
    assert {"PURE", "SPRO"} <= set(LEAVES["reasoning/per_step"].candidates)     # math row


@pytest.mark.parametrize("tokens, regime", [
    (1, "reasoning"), (29_999, "reasoning"), (30_000, "hybrid"), (100_000, "hybrid"),
    (100_001, "agentic"), (5_000_000, "agentic"),
])
def test_regime_boundaries(tokens, regime):
    assert recommend(tokens, "outcome", False, False).regime == regime


def test_path_records_questions_taken():
    rec = recommend(250_000, "outcome", True, False, True)
    answers = [a for _, a in rec.path]
    assert len(rec.path) == 3
    assert answers[1] == "no" and answers[2] == "yes"
    assert "agentic" in answers[0]
    short = recommend(1_000, "per_step", False, False)
    assert len(short.path) == 2 and short.path[1][1] == "each step can be checked"


def test_caveats_flag_unused_but_relevant_answers():
    rec = recommend(60_000, "outcome", False, can_replay=False)
    assert rec.leaf == "hybrid/deterministic"
    assert any("cannot replay" in c for c in rec.caveats)
    long_cot = recommend(20_000, "outcome", False, True)
    assert {"HICRA", "VinePPO"} <= set(long_cot.candidates)
    assert not recommend(2_000, "outcome", False, True).caveats


@pytest.mark.parametrize("kwargs, error, arg", [
    (dict(trajectory_tokens=-5), ValueError, "trajectory_tokens"),
    (dict(trajectory_tokens=0), ValueError, "trajectory_tokens"),
    (dict(trajectory_tokens=1.5), ValueError, "trajectory_tokens"),
    (dict(trajectory_tokens=True), TypeError, "trajectory_tokens"),
    (dict(trajectory_tokens="10k"), TypeError, "trajectory_tokens"),
    (dict(reward_density="dense"), ValueError, "reward_density"),
    (dict(stochastic_env="yes"), TypeError, "stochastic_env"),
    (dict(can_replay=1), TypeError, "can_replay"),
    (dict(privileged_info=None), TypeError, "privileged_info"),
])
def test_recommend_validates_inputs(kwargs, error, arg):
    args = dict(trajectory_tokens=10_000, reward_density="outcome", stochastic_env=False,
                can_replay=False)
    args.update(kwargs)
    with pytest.raises(error, match=rf"^{arg}:"):
        recommend(**args)


def test_integral_float_tokens_accepted():
    assert recommend(30_000.0, "outcome", False, False).regime == "hybrid"


@settings(max_examples=300, deadline=None)
@given(tokens=st.integers(min_value=1, max_value=10_000_000),
       density=st.sampled_from(["outcome", "per_step"]),
       stochastic=st.booleans(), replay=st.booleans(), privileged=st.booleans())
def test_recommend_property(tokens, density, stochastic, replay, privileged):
    names = _inventory_names_cached()
    rec = recommend(tokens, density, stochastic, replay, privileged)
    assert rec.leaf in LEAVES
    assert rec.method_class == LEAVES[rec.leaf].method_class
    assert rec.candidates and set(rec.candidates) <= names
    assert len(rec.candidates) == len(set(rec.candidates))
    expected = ("reasoning" if tokens < 30_000 else "hybrid" if tokens <= 100_000
                else "agentic")
    assert rec.regime == expected
    assert 2 <= len(rec.path) <= 3
    assert rec.inputs.trajectory_tokens == tokens


@given(tokens=st.integers(max_value=0))
def test_recommend_rejects_non_positive_tokens(tokens):
    with pytest.raises(ValueError, match="trajectory_tokens"):
        recommend(tokens, "outcome", False, False)


_NAMES: set[str] = set()


def _inventory_names_cached() -> set[str]:
    if not _NAMES:
        _NAMES.update(load_methods()["name"], load_baselines()["name"])
    return _NAMES



# --------------------------------------------------------------------------------------------
# Documented input -> leaf table (the behaviour of the original two-encoding tree)
# --------------------------------------------------------------------------------------------

#: (trajectory_tokens, reward_density, stochastic_env, can_replay, privileged_info) -> leaf, the
#: candidates a caveat adds, and a phrase of each caveat in order. Covers every leaf, both sides
#: of each token threshold (10K, 30K, 100K) and every caveat.
CASES = [
    ((1, "outcome", False, True, False), "reasoning/outcome", (), ()),
    ((9_999, "outcome", False, True, False), "reasoning/outcome", (), ()),
    ((10_000, "outcome", False, True, False), "reasoning/outcome", ("HICRA", "VinePPO"),
     ("'hard math'",)),
    ((20_000, "outcome", True, False, False), "reasoning/outcome", ("HICRA", "VinePPO"),
     ("only randomness", "'hard math'", "cannot replay")),
    ((29_999, "per_step", False, True, False), "reasoning/per_step", (), ()),
    ((29_999, "per_step", True, False, True), "reasoning/per_step", (),
     ("only randomness", "cannot replay")),
    ((30_000, "outcome", False, True, False), "hybrid/deterministic", (), ()),
    ((30_000, "per_step", False, False, False), "hybrid/deterministic", (), ("cannot replay",)),
    ((60_000, "outcome", True, True, False), "hybrid/stochastic", (), ()),
    ((100_000, "outcome", True, False, True), "hybrid/stochastic", (), ("web-navigation",)),
    ((100_001, "outcome", False, True, False), "agentic/replay", (), ("not replay",)),
    ((150_000, "outcome", True, True, True), "agentic/replay", (), ("complementary", "noisy", "not replay")),
    ((150_000, "per_step", False, False, True), "agentic/privileged", (), ()),
    ((150_000, "outcome", True, False, False), "agentic/online", (), ("recur", "not replay")),
    ((5_000_000, "per_step", False, False, False), "agentic/online", (), ("recur", "not replay")),
]


@pytest.mark.parametrize("args, leaf, added, caveats", CASES)
def test_documented_cases(args, leaf, added, caveats):
    rec = recommend(*args)
    assert rec.leaf == leaf
    assert rec.candidates == list(LEAVES[leaf].candidates) + list(added)
    assert len(rec.caveats) == len(caveats)
    for text, phrase in zip(rec.caveats, caveats):
        assert phrase in text


def test_cannot_replay_caveat_names_the_forking_candidates():
    rec = recommend(20_000, "outcome", True, False)
    assert rec.caveats[-1].startswith("SPO, VinePPO sample continuations")


# --------------------------------------------------------------------------------------------
# The spec: one encoding of the tree drives recommend() and the drawing
# --------------------------------------------------------------------------------------------

_GRID = list(itertools.product(
    [1, 9_999, 10_000, 29_999, 30_000, 100_000, 100_001, 10**7], ["outcome", "per_step"],
    [False, True], [False, True], [False, True]))


def _spec_edges() -> list[tuple[str, str, str]]:
    return [(qid, b.to, b.edge) for qid, q in QUESTIONS.items() for b in q.branches]


def test_spec_is_a_tree():
    targets = [t for _, t, _ in _spec_edges()]
    assert len(targets) == len(set(targets)), "every node has exactly one parent"
    assert set(targets) == (set(QUESTIONS) | set(LEAVES)) - {ROOT}
    assert ROOT in QUESTIONS and not set(QUESTIONS) & set(LEAVES)
    for qid, q in QUESTIONS.items():
        answers = [b.answer for b in q.branches]
        assert len(answers) == len(set(answers)), qid


def test_every_leaf_and_branch_is_reachable():
    reached_leaves, taken = set(), set()
    text_to_id = {q.text: qid for qid, q in QUESTIONS.items()}
    for args in _GRID:
        rec = recommend(*args)
        reached_leaves.add(rec.leaf)
        ids = [text_to_id[text] for text, _ in rec.path] + [rec.leaf]
        taken.update(zip(ids, ids[1:]))
    assert reached_leaves == set(LEAVES)
    assert taken == {(s, t) for s, t, _ in _spec_edges()}


@pytest.mark.parametrize("args", _GRID[::3])
def test_recommendation_path_is_the_drawn_path(args):
    rec = recommend(*args)
    text_to_id = {q.text: qid for qid, q in QUESTIONS.items()}
    nodes, edges = survey.decision_tree_graph(rec.leaf)
    assert set(nodes.id[nodes.active]) == {text_to_id[t] for t, _ in rec.path} | {rec.leaf}
    assert rec.path[0][0] == QUESTIONS[ROOT].text


def test_drawn_graph_is_exactly_the_spec():
    nodes, edges = survey.decision_tree_graph()
    assert list(zip(edges.source, edges.target, edges.label)) == _spec_edges()
    assert list(nodes.id) == list(QUESTIONS) + list(LEAVES)
    xy = {**{k: (q.x, q.y) for k, q in QUESTIONS.items()},
          **{k: (lf.x, lf.y) for k, lf in LEAVES.items()}}
    assert {r.id: (r.x, r.y) for r in nodes.itertuples()} == xy
    for e in edges.itertuples():
        assert (e.x, e.y, e.x2, e.y2) == (*xy[e.source], *xy[e.target])
    labels = dict(zip(nodes.id, nodes.label))
    assert all(labels[k] == lf.method_class for k, lf in LEAVES.items())
    assert set(nodes.kind) == {"question", "leaf"}


# --------------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------------

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
