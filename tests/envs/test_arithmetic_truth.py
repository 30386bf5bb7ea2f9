"""The cached Monte Carlo truth (labkit.envs.arithmetic.truth, data/lm_truth) matches the shipped model
and itself, the advantages it defines (``truth_step_advantage``, ``truth_token_advantage``) follow
VinePPO's rule, and the cached step alternatives belong to the shipped model.
"""

import hashlib
import time
from pathlib import Path

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit.mc import vineppo
from labkit.envs.arithmetic.lm import ArithmeticLM
from labkit.envs.arithmetic.truth import (REFERENCE_DIR, load_reference, load_step_alternatives,
                                          truth_step_advantage, truth_token_advantage)
from labkit.policies.lm import DEFAULT_LM_PATH

pytestmark = pytest.mark.usefixtures("one_torch_thread")


ROOT = Path(__file__).resolve().parents[2]




@pytest.fixture(scope="module")
def env():
    return ArithmeticLM.load()


@pytest.fixture(scope="module")
def reference(env):
    start = time.perf_counter()
    ro, meta = load_reference(env)
    return ro, meta, time.perf_counter() - start


def test_cache_belongs_to_the_shipped_model(reference):
    _, meta, _ = reference
    weights = (ROOT / "data" / "tiny_lm" / "model.safetensors").read_bytes()
    assert meta["provenance"]["inputs"]["tiny_lm/model.safetensors"] == hashlib.sha256(weights).hexdigest(), \
        "data/tiny_lm changed: rerun python scripts/build_lm_truth.py"
    assert meta["provenance"]["script"] == "scripts/build_lm_truth.py"
    assert meta["k"] >= 256


def test_reference_rollouts_are_consistent(reference):
    ro, meta, seconds = reference
    V = ro.truth["step_values"]
    present = ro.view(ro.rewards, "step", "sum")[1]
    assert V.shape == present.shape and bool(((V >= 0) & (V <= 1)).all())
    assert bool((V[~present] == 0).all())
    # prefixes of rows that ended right are worth more, on average, than those of rows that ended wrong
    ok = ro.scores > 0
    assert 0 < int(ok.sum()) < len(ro), "the reference set should hold both outcomes"
    last = V[torch.arange(len(ro)), ro.n_steps - 1]
    assert float(last[ok].mean()) > float(last[~ok].mean())


def test_token_values_agree_with_step_values_where_they_coincide(reference):
    """Two independent 256-vine estimates of the same prefix: within 4 standard errors."""
    ro, meta, _ = reference
    k = meta["k"]
    tv, sv = ro.truth["token_values"], ro.truth["step_values"]
    first_pos, present = ro.view(torch.arange(ro.horizon).expand_as(ro.mask).double(), "step", "first")
    checked = 0
    for b in meta["token_rows"]:
        for i in range(int(ro.n_steps[b])):
            t = int(first_pos[b, i])
            a, c = float(tv[b, t]), float(sv[b, i])
            se = (max(a * (1 - a), 1 / k) / k + max(c * (1 - c), 1 / k) / k) ** 0.5
            assert abs(a - c) < 4 * se + 1e-6, (b, i, a, c)
            checked += 1
    assert checked >= 8


def test_live_vines_converge_to_the_cached_truth(env, reference):
    ro, meta, _ = reference
    prefixes, problems, present = env.step_prefixes(ro)
    pick = list(range(0, len(prefixes), max(1, len(prefixes) // 12)))[:12]
    live, _ = env.prefix_values([prefixes[i] for i in pick], [problems[i] for i in pick], 64, seed=123)
    cached = ro.truth["step_values"][present][pick]
    for a, c in zip(live.tolist(), cached.tolist()):
        se = (max(c * (1 - c), 1 / 256) / 64 + max(c * (1 - c), 1 / 256) / 256) ** 0.5
        assert abs(a - c) < 4.5 * se + 1e-6, (a, c)


def test_truth_step_advantage_is_the_vineppo_formula_on_cached_values(reference):
    ro, _, _ = reference
    adv = truth_step_advantage(ro)
    v = ro.truth["step_values"]
    step_adv, present = ro.view(adv, "step", "mean")
    b = 0
    n = int(present[b].sum())
    for i in range(n):
        after = v[b, i + 1] if i + 1 < n else ro.scores[b]  # the last step is followed by the outcome
        assert step_adv[b, i] == pytest.approx(float(after - v[b, i]), abs=1e-6)
    # telescoping: a row's step advantages sum to its outcome minus V before the first step
    sums = step_adv.where(present, 0).sum(1)
    assert torch.allclose(sums.double(), ro.scores.double() - v[:, 0], atol=1e-6)
    # bit for bit VinePPO's credit with the cached values as its value function (what it was before
    # the rule had one home, and what the bench scores against)
    cached = ro.truth["step_values"]
    assert torch.equal(adv, vineppo(ro, value_fn=lambda r, k: (cached, Cost()), k=1).token)


def test_truth_token_advantage_telescopes(reference):
    ro, _, _ = reference
    adv = truth_token_advantage(ro)
    R = ro.truth["token_values"].shape[0]
    assert adv.shape == (R, ro.horizon)
    assert torch.allclose(adv.sum(1).double(), ro.scores[:R].double() - ro.truth["token_values"][:, 0], atol=1e-6)
    assert bool((adv[~ro.mask[:R]] == 0).all())


def test_the_truth_needs_its_cached_values(reference):
    ro, _, _ = reference
    with pytest.raises(ValueError, match="^rollouts"):
        truth_step_advantage(ro.with_(truth={}))
    with pytest.raises(ValueError, match="^rollouts"):
        truth_token_advantage(ro.with_(truth={}))


def test_step_alternatives_cache(lm_env):
    alt = load_step_alternatives(lm_env)
    meta, groups, values = alt["meta"], alt["groups"], alt["mc_values"]
    C = len(alt["prefixes"])
    assert C == meta["n_candidates"] == len(groups) == len(values) == len(alt["texts"]) == len(alt["problems"])
    assert len(alt["state_prefixes"]) == meta["n_states"] == int(groups.max()) + 1
    assert bool((torch.bincount(groups) >= 2).all())
    assert bool(((values >= 0) & (values <= 1)).all())
    # every candidate continues its own state's prefix, and distinct candidates differ
    for s in range(meta["n_states"]):
        rows = [alt["prefixes"][c] for c in (groups == s).nonzero().squeeze(1).tolist()]
        assert all(r[:len(alt["state_prefixes"][s])] == alt["state_prefixes"][s] for r in rows)
        assert len({tuple(r) for r in rows}) == len(rows)
    # a candidate that ends the episode is worth its verifier reward
    for c in alt["ends_episode"].nonzero().squeeze(1).tolist():
        n_prompt = len(lm_env.prompt_ids(alt["problems"][c]))
        assert float(values[c]) == lm_env.grade(alt["problems"][c], alt["prefixes"][c][n_prompt:]).reward
    weights = (DEFAULT_LM_PATH / "model.safetensors").read_bytes()
    assert meta["provenance"]["inputs"]["tiny_lm/model.safetensors"] == hashlib.sha256(weights).hexdigest()
    with pytest.raises(FileNotFoundError, match="path"):
        load_step_alternatives(lm_env, path=REFERENCE_DIR / "missing")
