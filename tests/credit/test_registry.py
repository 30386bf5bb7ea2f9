"""The estimator contract (labkit.credit.registry): every registered estimator carries a checked
spec, its level is the level of the credit it returns, and register refuses a bad field by name."""
from __future__ import annotations

import re

import pytest
import torch

from labkit.core.checks import check_number, per_position
from labkit.core.credit import Credit
from labkit.credit import ESTIMATORS, register, spec, specs
from labkit.credit.registry import FEATURES, INPUT_KINDS, LEVELS, STATUSES, EstimatorSpec

import fuzz_cases as fc

# an OpenReview paper is cited by its forum id, as the inventory writes it (openreview-<id>)
CITATION = re.compile(r"^\d{4}\.\d{4,5}$|^openreview-[A-Za-z0-9_-]+$|\b(1[89]|20)\d{2}\b")


def test_specs_follow_the_registry_order_and_spec_looks_names_up():
    assert [s.name for s in specs()] == list(ESTIMATORS)
    assert spec("grpo").fn is ESTIMATORS["grpo"] and isinstance(spec("grpo"), EstimatorSpec)
    with pytest.raises(ValueError, match="^name: no estimator 'magic'"):
        spec("magic")


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_every_spec_is_complete(name):
    s = spec(name)
    assert s.level in LEVELS and s.status in STATUSES
    assert set(s.needs) <= set(FEATURES) and set(s.inputs.values()) <= set(INPUT_KINDS)
    assert bool(s.replaces) == (s.status != "implemented"), "replaces says what an adaptation or stand-in substitutes"
    for source in s.paper.split("; "):
        assert CITATION.search(source), f"{name}: {source!r} is neither an arXiv id, an OpenReview id nor a citation with a year"
    assert s.equation.strip() and s.symbols.strip() and not s.symbols.startswith("stand-in")


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_spec_level_is_the_level_of_the_credit_returned(name):
    ro = fc.base_rollouts(name)
    torch.manual_seed(0)
    credit = ESTIMATORS[name](ro, **fc.estimator_inputs(name, ro))
    assert credit.level == spec(name).level


def test_the_arxiv_ids_of_a_paper_field():
    assert spec("turn_gae").arxiv_ids == ("2512.17008", "2511.08325")
    assert spec("reinforce").arxiv_ids == ()
    assert spec("gvpo").arxiv_ids == () and spec("gvpo").paper_ids == ("openreview-RY47Tq0VsV",)
    assert spec("turn_gae").paper_ids == spec("turn_gae").arxiv_ids


def _toy(rollouts, *, values, scale: float = 1.0):
    return Credit.from_tokens(rollouts, scale * values, "toy")


GOOD = dict(level="token", inputs={"values": "token_values"}, status="implemented", paper="2401.00001",
            equation=r"A_t = c \, V_t", symbols="V: a critic's value")


@pytest.mark.parametrize("change,field", [
    ({"level": "sentence"}, "level"),
    ({"needs": "groups"}, "needs"),
    ({"needs": ("wings",)}, "needs"),
    ({"needs": ("groups", "groups")}, "needs"),
    ({"inputs": {"colour": "token_values"}}, "inputs"),             # not an option of the function
    ({"inputs": {"values": "a crystal ball"}}, "inputs"),           # not a known kind
    ({"inputs": {}}, "inputs"),                                     # 'values' has no default
    ({"status": "faithful"}, "status"),
    ({"status": "stand-in"}, "replaces"),                           # a stand-in says what it replaces
    ({"replaces": "a judge"}, "replaces"),                          # an implemented one replaces nothing
    ({"paper": ""}, "paper"),
    ({"paper": "2401.00001\nand more"}, "paper"),
    ({"equation": "$A_t$"}, "equation"),
    ({"equation": r"A_{t"}, "equation"),
    ({"equation": r"A_t}{"}, "equation"),
    ({"symbols": ""}, "symbols"),
    ({"symbols": 3}, "symbols"),
])
def test_register_refuses_a_bad_field_by_name(change, field):
    with pytest.raises((ValueError, TypeError), match=f"^{field}: estimator 'toy_bad'"):
        register("toy_bad", **(GOOD | change))(_toy)
    assert "toy_bad" not in ESTIMATORS


def test_register_refuses_bad_names_and_functions():
    with pytest.raises(ValueError, match="^name: estimator 'grpo' is registered twice"):
        register("grpo", **GOOD)(_toy)
    with pytest.raises(ValueError, match="^name: expected a Python identifier"):
        register("my credit", **GOOD)(_toy)
    with pytest.raises(TypeError, match="^fn: estimator 'toy_bad'"):
        register("toy_bad", **GOOD)(lambda x, values: x)
    with pytest.raises(TypeError, match="^level"):
        register("toy_bad", **{k: v for k, v in GOOD.items() if k != "level"})
    assert "toy_bad" not in ESTIMATORS


def test_a_registered_estimator_checks_its_call_and_carries_its_spec():
    try:
        fn = register("toy_ok", **GOOD | {"status": "adaptation", "replaces": "the paper's critic: a table"})(_toy)
        s = spec("toy_ok")
        assert s.fn is fn and fn.__wrapped__ is _toy and s.inputs == {"values": "token_values"}
        with pytest.raises(TypeError):
            s.inputs["values"] = "turn_values"   # the spec is read-only
        ro = fc.plain()
        assert torch.equal(fn(ro, values=torch.ones(ro.mask.shape)).token, ro.mask.double())
        with pytest.raises(TypeError, match="^colour: toy_ok has no option"):
            fn(ro, values=torch.ones(ro.mask.shape), colour=1)
        with pytest.raises(TypeError, match="^rollouts"):
            fn(None, values=1)
    finally:
        ESTIMATORS.pop("toy_ok", None)


# --------------------------------------------------------------------------- a new estimator
def _toy_critic_gap(rollouts, *, values, scale: float = 1.0):
    """Toy critic gap (a test's estimator, 2026): the critic's value, scaled, as credit.

    Inputs:
        rollouts: ``mask``.
        ``values`` (token_values): the critic's V at every position.

    Formula:
        A_t = scale * V_t

    Defaults:
        scale = 1.

    Degenerate input:
        none.

    Deviations from the reference:
        none.

    Returns:
        credit at level "token"; no ``info``.

    Cost:
        none.
    """
    scale = check_number("scale", scale)
    return Credit.from_tokens(rollouts, scale * per_position("values", values, rollouts.mask), "toy_critic_gap")


def _toy_entropy(rollouts):
    """Toy entropy credit (a test's estimator, 2026): the policy's entropy as credit.

    Inputs:
        rollouts: ``entropies``.

    Formula:
        A_t = H_t

    Defaults:
        none.

    Degenerate input:
        none.

    Deviations from the reference:
        none.

    Returns:
        credit at level "token"; no ``info``.

    Cost:
        none.
    """
    if rollouts.entropies is None:
        raise ValueError("entropies: toy_entropy reads the policy's entropies")
    return Credit.from_tokens(rollouts, rollouts.entropies.double(), "toy_entropy")


def test_a_new_estimator_is_picked_up_everywhere_from_its_spec():
    """Adding an estimator is its function and its @register, nothing else: diagnose, the bench,
    the method cards and the fuzz harness read what they need from the spec."""
    from labkit.bench import Instance, applies, run_cell, suite_tasks
    from labkit.course.methods import show_methods
    from labkit.diagnose import compare_estimators, supported_estimators

    try:
        register("toy_critic_gap", level="token", inputs={"values": "token_values"}, status="implemented",
                 paper="Toy 2026", equation=r"A_t = c \, V_t", symbols="V_t: the critic's value; c: scale")(
                     _toy_critic_gap)
        register("toy_entropy", level="token", needs=("entropies",), status="adaptation",
                 replaces="a critical-action detector: the policy's entropy", paper="Toy 2026", equation="A_t = H_t",
                 symbols="H_t: the policy's entropy at t")(_toy_entropy)
        ro = fc.plain()

        # diagnose: runs what needs no input and finds its feature, says why not otherwise
        run, not_run = supported_estimators(ro)
        assert "toy_entropy" in run and not_run["toy_critic_gap"] == "needs values: a critic's value of every position"
        assert supported_estimators(ro.with_(entropies=None))[1]["toy_entropy"] == \
            "the data lacks the sampling policy's entropies"
        assert compare_estimators(ro, ["grpo", "toy_entropy"], sample=None).ran == ["grpo", "toy_entropy"]

        # the bench: applies where the task gives its inputs, and runs there
        tasks, (seed,) = suite_tasks("tiny")
        chain, team = tasks[0], tasks[-1]
        built = {t.name: t.build(seed) for t in (chain, team)}
        assert applies(ESTIMATORS["toy_critic_gap"], built[chain.name]) is None
        assert run_cell("tiny", chain, "toy_critic_gap", seed, built[chain.name])["status"] == "ok"
        skipped = run_cell("tiny", team, "toy_critic_gap", seed, built[team.name])
        assert skipped["status"] == "skipped" and skipped["reason"] == "needs values, which this task does not provide"
        view = built[team.name]
        assert applies(ESTIMATORS["toy_entropy"], Instance(view.rollouts, view.truth, view.level)) is None

        # the method card: its equation, symbols and formula
        card = show_methods("toy_critic_gap").cards[0]
        assert card.equation == r"A_t = c \, V_t" and card.formula == "A_t = scale * V_t"

        # the fuzz harness: a valid call from the kinds, and every probe of both behaves
        kw = fc.estimator_inputs("toy_critic_gap", ro)
        assert set(kw) == {"values"} and tuple(kw["values"].shape) == tuple(ro.mask.shape)
        probes = fc.estimator_probes(["toy_critic_gap", "toy_entropy"])
        assert {p.desc for p in probes} >= {"values: NaN everywhere", "scale=string", "rollouts without entropies"}
        bad = [(p.id, out.cls, out.msg) for p in probes if not fc.expected_ok(p, out := fc.run_probe(p))]
        assert bad == []
    finally:
        ESTIMATORS.pop("toy_critic_gap", None)
        ESTIMATORS.pop("toy_entropy", None)
