"""Turn credit from checked progress and execution feedback (labkit.credit.checked_turns): VPR and
GVPO on hand-built batches, and their ToolWorld producers (labkit.envs.toolworld.progress) on a
hand-written transcript.
"""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.credit import estimate, spec
from labkit.credit.checked_turns import gvpo, vpr
from labkit.envs.toolworld import RUN_TESTS, SEARCH, START, SUBMIT, TESTS_FAIL, TESTS_PASS, ToolWorld
from labkit.envs.toolworld.progress import execution_feedback, progress_states

from turn_batches import outcome_turns, turn_credit

pytestmark = pytest.mark.usefixtures("one_torch_thread")

S2 = math.sqrt(0.5)   # GRPO's outcome advantage of {1, 0}: (1 - 0.5) / std{1, 0} = 0.5 / sqrt(0.5)
NAN = float("nan")


def _case():
    # traj 0: 3 turns, success; traj 1: 2 turns, failure (same task); traj 2 (own task): 1 turn, success
    ro = outcome_turns([3, 2, 1], [1.0, 0.0, 1.0], groups=[0, 0, 1])
    p = torch.tensor([[0.0, 0.25, 0.5, 1.0],
                      [0.0, 0.25, 0.0, 9.0],      # column 3 is past the end: ignored
                      [0.0, 1.0, NAN, NAN]], dtype=torch.float64)
    return ro, p


# --------------------------------------------------------------------------- VPR
def test_vpr_hand_computed_progress_telescopes():
    ro, p = _case()
    c = vpr(ro, progress=p, eps=0.0)
    # verified rewards v_k = p_{k+1} - p_k: [.25, .25, .5], [.25, -.25], [1]
    assert c.info["verified_rewards"].tolist() == [[0.25, 0.25, 0.5], [0.25, -0.25, 0.0], [1.0, 0.0, 0.0]]
    # gamma 1: A = O + (p_n - p_k); O = +-sqrt(.5) in task 0, the raw outcome 1 in task 1 (a group of one)
    want = torch.tensor([[S2 + 1.0, S2 + 0.75, S2 + 0.5],
                         [-S2 + 0.0, -S2 - 0.25, 0.0],
                         [1.0 + 1.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert c.level == "turn" and c.cost == Cost()
    # gamma 0.5, row 0: G_2 = .5, G_1 = .25 + .5 * .5 = .5, G_0 = .25 + .5 * .5 = .5
    d = vpr(ro, progress=p, eps=0.0, gamma=0.5)
    assert turn_credit(d, ro)[0].tolist() == pytest.approx([S2 + 0.5] * 3)
    # weights: the outcome term off leaves the progress still to be made
    e = vpr(ro, progress=p, outcome_weight=0.0, progress_weight=2.0)
    assert turn_credit(e, ro)[1, :2].tolist() == pytest.approx([0.0, -0.5])


def test_vpr_return_to_go_baseline_hand_computed():
    ro, p = _case()
    c = vpr(ro, progress=p, baseline="return_to_go", eps=0.0)
    # G_{i,k} = (p_n - p_k) + s_i: [2, 1.75, 1.5], [0, -.25], [2]
    # index 0 of task 0: G = 2 and 0, leave-one-out difference +-2, std{2, 0} = sqrt(2) -> +-sqrt(2)
    # index 1: 1.75 and -.25 -> +-sqrt(2); index 2: row 0 alone -> its raw G 1.5; task 1 alone -> 2
    r2 = math.sqrt(2.0)
    want = torch.tensor([[r2, r2, 1.5], [-r2, -r2, 0.0], [2.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert c.info["baseline"] == "return_to_go"
    with pytest.raises(ValueError, match="^gamma:"):
        vpr(ro, progress=p, baseline="return_to_go", gamma=0.9)


def test_vpr_degenerate_inputs():
    ro, p = _case()
    # a constant progress state: plain GRPO
    flat = vpr(ro, progress=torch.full_like(p, 0.3))
    grpo = estimate("grpo", ro)
    assert torch.allclose(flat.token, grpo.token)
    # equal outcomes in a task: credited by verified progress alone
    same = outcome_turns([2, 2], [1.0, 1.0], groups=[0, 0])
    q = torch.tensor([[0.0, 0.5, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(vpr(same, progress=q), same),
                          torch.tensor([[1.0, 0.5], [1.0, 1.0]], dtype=torch.float64))
    # a callable is run once and counted as one checker pass per trajectory
    c = vpr(ro, progress=lambda r: p)
    assert c.cost == Cost(aux_calls=3)
    assert torch.allclose(c.token, vpr(ro, progress=p).token)


def test_vpr_bad_input():
    ro, p = _case()
    with pytest.raises(ValueError, match="^progress:"):
        vpr(ro, progress=p[:, :3])
    bad = p.clone()
    bad[0, 2] = NAN
    with pytest.raises(ValueError, match="^progress:"):
        vpr(ro, progress=bad)
    with pytest.raises(ValueError, match="^progress:"):
        vpr(ro, progress=None)
    with pytest.raises(ValueError, match="^baseline:"):
        vpr(ro, progress=p, baseline="mean")
    with pytest.raises(ValueError, match="^gamma:"):
        vpr(ro, progress=p, gamma=1.5)
    with pytest.raises(TypeError, match="^progress_weight:"):
        vpr(ro, progress=p, progress_weight="x")


# --------------------------------------------------------------------------- GVPO
def _feedback():
    return torch.tensor([[0.0, 1.0, 1.0], [-1.0, 0.0, 5.0], [-1.0, NAN, NAN]], dtype=torch.float64)


def test_gvpo_hand_computed():
    ro, _ = _case()
    c = gvpo(ro, feedback=_feedback(), eps=0.0)
    # A = O + 0.5 c: O = +-sqrt(.5) in task 0, 1 (raw) in task 1; entries past a trajectory's end ignored
    want = torch.tensor([[S2, S2 + 0.5, S2 + 0.5], [-S2 - 0.5, -S2, 0.0], [1.0 - 0.5, 0.0, 0.0]],
                        dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert c.level == "turn" and c.cost == Cost()
    assert c.info["feedback"][1].tolist() == [-1.0, 0.0, 0.0]
    # normalize = "group": task 0 pools c = [0, 1, 1, -1, 0], mean .2, unbiased std sqrt(.7);
    # task 1 is a pool of one and keeps its raw -1
    d = gvpo(ro, feedback=_feedback(), beta=1.0, normalize="group", eps=0.0)
    s = math.sqrt(0.7)
    want = [[S2 - 0.2 / s, S2 + 0.8 / s, S2 + 0.8 / s], [-S2 - 1.2 / s, -S2 - 0.2 / s]]
    got = turn_credit(d, ro)
    assert got[0].tolist() == pytest.approx(want[0]) and got[1, :2].tolist() == pytest.approx(want[1])
    assert got[2, 0].item() == pytest.approx(0.0)


def test_gvpo_degenerate_inputs():
    ro, _ = _case()
    zero = gvpo(ro, feedback=torch.zeros(3, 3))
    assert torch.allclose(zero.token, estimate("grpo", ro).token)
    # beta 0: GRPO whatever the feedback
    assert torch.allclose(gvpo(ro, feedback=_feedback(), beta=0.0).token, estimate("grpo", ro).token)
    # feedback equal on every turn of a group: nothing after normalisation
    ones = torch.ones(3, 3)
    d = gvpo(ro, feedback=ones, normalize="group")
    assert torch.allclose(turn_credit(d, ro)[:2], turn_credit(estimate("grpo", ro), ro)[:2])
    c = gvpo(ro, feedback=lambda r: _feedback())
    assert c.cost == Cost(aux_calls=3)


def test_gvpo_bad_input():
    ro, _ = _case()
    f = _feedback()
    with pytest.raises(ValueError, match="^feedback:"):
        gvpo(ro, feedback=f[:, :2])
    bad = f.clone()
    bad[0, 0] = 0.5
    with pytest.raises(ValueError, match="^feedback:"):
        gvpo(ro, feedback=bad)
    bad[0, 0] = NAN
    with pytest.raises(ValueError, match="^feedback:"):
        gvpo(ro, feedback=bad)
    with pytest.raises(ValueError, match="^beta:"):
        gvpo(ro, feedback=f, beta=-1.0)
    with pytest.raises(ValueError, match="^normalize:"):
        gvpo(ro, feedback=f, normalize="batch")


def test_registered_specs():
    v, g = spec("vpr"), spec("gvpo")
    assert v.status == "implemented" and v.arxiv_ids == ("2605.10325",)
    assert dict(v.inputs) == {"progress": "progress_states"}
    assert g.status == "adaptation" and g.paper == "openreview-RY47Tq0VsV" and g.replaces
    assert dict(g.inputs) == {"feedback": "execution_feedback"}


# --------------------------------------------------------------------------- ToolWorld producers
def _transcripts():
    """Three files, the bug in file 1, rows padded to 6 turns:

    row 0: search -> hint 1; open 1 -> looks buggy; edit 1; run tests -> pass; submit (success)
    row 1: search -> hint 0; open 0 -> looks fine; edit 0; run tests -> fail; submit (rejected)
    row 2: search -> hint 1; search -> hint 2; edit 1; run tests -> fail (flaky); submit (success)
    row 3: run tests -> fail; submit (rejected)
    """
    env = ToolWorld(3, max_turns=6)
    h, bug, fine, ed = env.hint_obs, env.buggy_obs, env.fine_obs, env.edited_obs
    rows = [([SEARCH, env.open_action(1), env.edit_action(1), RUN_TESTS, SUBMIT],
             [h(1), bug(1), ed(1), TESTS_PASS, -1], True),
            ([SEARCH, env.open_action(0), env.edit_action(0), RUN_TESTS, SUBMIT],
             [h(0), fine(0), ed(0), TESTS_FAIL, -1], False),
            ([SEARCH, SEARCH, env.edit_action(1), RUN_TESTS, SUBMIT],
             [h(1), h(2), ed(1), TESTS_FAIL, -1], True),
            ([RUN_TESTS, SUBMIT], [TESTS_FAIL, -1], False)]
    T = env.max_turns
    pad = lambda x, v: x + [v] * (T - len(x))  # noqa: E731
    acts, states, after, mask, fixed, rew = [], [], [], [], [], []
    for a, o, ok in rows:
        n = len(a)
        acts.append(pad(a, 0))
        states.append(pad([START] + o[:-1], 0))
        after.append(pad(o, -1))
        mask.append(pad([True] * n, False))
        fixed_before = [any(x == env.edit_action(1) for x in a[:k]) for k in range(n)]
        fixed.append(pad(fixed_before, False))
        rew.append(pad([0.0] * (n - 1) + [1.0 if ok else 0.0], 0.0))
    mask = torch.tensor(mask)
    tid = torch.where(mask, torch.arange(T), -1)
    ro = Rollouts(tokens=torch.tensor(acts), mask=mask, rewards=torch.tensor(rew, dtype=torch.float64),
                  group_ids=torch.zeros(4, dtype=torch.long), step_ids=tid.clone(), turn_ids=tid,
                  states=torch.tensor(states),
                  truth={"observations_after": torch.tensor(after), "bug": torch.ones(4, dtype=torch.long),
                         "fixed": torch.tensor(fixed), "success": torch.tensor([r[2] for r in rows])})
    return env, ro


def test_progress_states_hand_written_transcript():
    env, ro = _transcripts()
    p = progress_states(env, ro)
    # levels / 4: located (a hint or read naming file 1) 1, fixed 2, fixed and tests pass 3, success 4
    assert (p * 4).tolist() == [[0, 1, 1, 2, 3, 4],
                                [0, 0, 0, 0, 0, 0],        # misled: never located, wrong submit
                                [0, 1, 0, 2, 2, 4],        # the second search moves off file 1: -1
                                [0, 0, 0, 0, 0, 0]]        # padded columns repeat the last level
    # VPR on it: row 2's second search is the one turn with negative verified progress
    c = vpr(ro, progress=p)
    assert c.info["verified_rewards"][2].tolist() == [0.25, -0.25, 0.5, 0.0, 0.5]


def test_execution_feedback_hand_written_transcript():
    env, ro = _transcripts()
    f = execution_feedback(env, ro)
    # the edit gets its test run's verdict; an edit of a file read as fine -1; a submit after
    # "tests pass" +1, after anything else -1; the flaky failure in row 2 blames the fixing edit
    assert f.tolist() == [[0, 0, 1, 0, 1], [0, 0, -1, 0, -1], [0, 0, -1, 0, -1], [0, -1, 0, 0, 0]]
    assert f.dtype == torch.float64
    with pytest.raises(TypeError, match="^env:"):
        execution_feedback(object(), ro)
    no_truth = Rollouts(tokens=ro.tokens, mask=ro.mask, rewards=ro.rewards, turn_ids=ro.turn_ids,
                        states=ro.states)
    with pytest.raises(ValueError, match="^rollouts.truth"):
        progress_states(env, no_truth)
