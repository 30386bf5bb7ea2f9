"""The estimator contract (labkit.credit.registry): every registered estimator carries a checked
spec, its level is the level of the credit it returns, and register refuses a bad field by name."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from labkit.core.rollouts import Credit
from labkit.credit import ESTIMATORS, register, spec, specs
from labkit.credit.registry import FEATURES, INPUT_KINDS, LEVELS, STATUSES, EstimatorSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_cases as fc  # noqa: E402

CITATION = re.compile(r"^\d{4}\.\d{4,5}$|\b(1[89]|20)\d{2}\b")


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
        assert CITATION.search(source), f"{name}: {source!r} is neither an arXiv id nor a citation with a year"
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
