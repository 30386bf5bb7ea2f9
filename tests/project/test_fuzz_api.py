"""The fuzz of labkit's public API: random valid Rollouts give finite credit from every
estimator that runs on plain Rollouts, every invalid input gets a ValueError/TypeError naming the
argument, every valid edge input a finite result. Probes that still miss (tests/fuzz_cases.py
KNOWN_GAPS) are strict xfails: fixing one fails the test until its id leaves the list."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS

import fuzz_cases as fc

PROBES = fc.build_probes()


def _param(p: fc.Probe):
    marks = []
    if p.id in fc.KNOWN_GAPS:
        marks.append(pytest.mark.xfail(strict=True, reason=f"known gap: {fc.KNOWN_GAPS[p.id]}"))
    return pytest.param(p, id=p.id, marks=marks)


@pytest.mark.parametrize("probe", [_param(p) for p in PROBES if p.kind == "invalid"])
def test_invalid_input_gets_a_clear_error(probe):
    out = fc.run_probe(probe)
    assert out.cls == "clear", f"{out.cls}: {out.exc}: {out.msg}"


@pytest.mark.parametrize("probe", [_param(p) for p in PROBES if p.kind != "invalid"])
def test_edge_input_is_handled(probe):
    out = fc.run_probe(probe)
    assert fc.expected_ok(probe, out), f"{out.cls}: {out.exc}: {out.msg}"


def test_the_harness_fills_every_input_kind_an_estimator_can_declare():
    from labkit.credit import specs
    from labkit.credit.registry import INPUT_KINDS
    assert [k for k in INPUT_KINDS if not fc.can_fill(k)] == []
    for s in specs():
        for option, kind in s.inputs.items():
            assert fc.can_fill(kind), (s.name, option, kind)


def test_known_gaps_name_existing_probes():
    ids = {p.id for p in PROBES}
    assert not set(fc.KNOWN_GAPS) - ids, sorted(set(fc.KNOWN_GAPS) - ids)[:5]


# --------------------------------------------------------------------------- property test
# Estimators that need an environment's simulator cannot run on random Rollouts; every other one
# runs with generic inputs built from the batch (tests/fuzz_cases.estimator_inputs).
PLAIN = [n for n in sorted(ESTIMATORS) if not fc.toolworld_only(n)]


@st.composite
def valid_rollouts(draw):
    B = draw(st.integers(1, 5))
    T = draw(st.integers(1, 7))
    mask = torch.tensor(draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=B, max_size=B)))
    # at least one generated position per batch keeps the property about credit, not emptiness
    # (empty batches are the "either" probes of the table above)
    if not bool(mask.any()):
        mask[0, 0] = True
    n_groups = draw(st.integers(1, B))
    groups = torch.tensor(draw(st.lists(st.integers(0, n_groups - 1), min_size=B, max_size=B)))
    turns = draw(st.integers(1, 3))
    agents = draw(st.integers(1, 3))
    outcome = draw(st.sampled_from(["binary", "constant", "extreme", "dense"]))
    gen = mask.long().cumsum(1) - 1
    n_gen = mask.sum(1, keepdim=True).clamp(min=1)
    turn = torch.where(mask, (gen * turns) // n_gen, -1)
    agent = torch.where(mask, turn % agents, -1)
    last = torch.where(mask, torch.arange(T).expand(B, T), -1).max(1).values
    flags = draw(st.lists(st.booleans(), min_size=B, max_size=B))
    rewards = torch.zeros(B, T)
    for b in range(B):
        if last[b] >= 0:
            rewards[b, last[b]] = {"binary": float(flags[b]), "constant": 1.0,
                                   "extreme": 1e6 if flags[b] else -1e6, "dense": float(flags[b])}[outcome]
    if outcome == "dense":
        rewards = torch.where(mask, rewards + 0.1, 0.0)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 16)))
    tokens = torch.randint(0, 7, (B, T), generator=g)
    step = torch.where(mask, gen, -1)
    keys = [[("k", int(s) % 2) for s in range(int(n))] for n in (step.max(1).values + 1)]
    return Rollouts(tokens=tokens, mask=mask, rewards=rewards, group_ids=groups, step_ids=step,
                    turn_ids=turn, agent_ids=agent,
                    logprobs=torch.where(mask, -torch.rand(B, T, generator=g) - 0.05, 0.0),
                    entropies=torch.where(mask, torch.rand(B, T, generator=g), 0.0),
                    states=tokens.clone(), anchor_keys=keys), outcome


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(valid_rollouts())
def test_random_valid_rollouts_give_finite_credit_of_shape_BT(drawn):
    ro, outcome = drawn
    torch.manual_seed(0)
    for name in PLAIN:
        if name in fc.BINARY_OUTCOME and outcome in ("extreme", "dense"):
            continue  # hindsight credit needs a 0/1 outcome and says so by name
        credit = ESTIMATORS[name](ro, **fc.estimator_inputs(name, ro))
        assert tuple(credit.token.shape) == (ro.batch_size, ro.horizon), name
        assert bool(torch.isfinite(credit.token).all()), name
        assert bool((credit.token[~ro.mask] == 0).all()), name
