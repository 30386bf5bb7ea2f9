"""A^3 (labkit.credit.structured_actions): outcome + structure residuals + rollout-tree margins, by hand."""

import dataclasses

import pytest
import torch

from labkit.core.credit import Cost
from labkit.credit import estimate
from labkit.credit.structured_actions import a3, parse_command, turn_commands

from turn_batches import turn_batch, turn_credit

# one task group of five episodes; the outcome sits on the last turn
COMMANDS = [["open 1", "edit 1", "submit"],      # s = 1
            ["open 1", "edit 2", "submit"],      # s = 0
            ["search", "edit 1", "submit"],      # s = 1
            ["search", "submit"],                # s = 0
            ["open 1", "edit 1", "submit"]]      # s = 1
SEEN = [["start", "file 1 looks buggy", "edited file 1"],
        ["start", "file 1 looks buggy", "edited file 2"],
        ["start", "hint: file 1", "edited file 1"],
        ["start", "hint: file 1"],
        ["start", "file 1 looks buggy", "edited file 1"]]
OUTCOMES = [1, 0, 1, 0, 1]


def _case(keys=True):
    rows = [[0] * (len(c) - 1) + [s] for c, s in zip(COMMANDS, OUTCOMES)]
    return turn_batch(rows, groups=[0] * 5, keys=SEEN if keys else None)


def _padded(rows):
    return torch.tensor([r + [0.0] * (3 - len(r)) for r in rows], dtype=torch.float64)


# outcome: s - mean s, mean 0.6
OUT = torch.tensor([0.4, -0.6, 0.4, -0.6, 0.4], dtype=torch.float64)
# residual, sub-chains: (open, edit) holds edit 1 (R 1), edit 2 (R 0), edit 1 (R 1): class mean 2/3,
# so edit 1 gets 1 - 2/3 and edit 2 gets 0 - 2/3; (search, edit) holds one edit: 0; no other verb
# has two arguments in the same class: 0
RES_SUB = _padded([[0, 1 / 3, 0], [0, -2 / 3, 0], [0, 0, 0], [0, 0], [0, 1 / 3, 0]])
# residual, verbs: edit holds edit 1 (x3, R 1) and edit 2 (R 0): mean 3/4 -> +1/4, -3/4
RES_VERB = _padded([[0, 1 / 4, 0], [0, -3 / 4, 0], [0, 1 / 4, 0], [0, 0], [0, 1 / 4, 0]])
# margins: at the root everyone saw "start"; branch "open 1" (s 1, 0, 1: mean 2/3) against "search"
# (s 1, 0: mean 1/2): +1/6 and -1/6. At turn 1 after open 1 / buggy: edit 1 (mean 1) vs edit 2 (0): +-1;
# after search / hint: edit 1 (1) vs submit (0): +-1. At turn 2 episodes 0 and 4 share their node
# but both submit: no divergence, 0; the others are alone: 0.
MARGIN = _padded([[1 / 6, 1, 0], [1 / 6, -1, 0], [-1 / 6, 1, 0], [-1 / 6, -1], [1 / 6, 1, 0]])


def test_a3_each_part_and_the_sum_hand_computed():
    ro = _case()
    c = a3(ro, commands=COMMANDS)
    assert torch.allclose(c.info["outcome_term"], OUT)
    assert torch.allclose(c.info["residual_term"], RES_SUB)
    assert torch.allclose(c.info["margin_term"], MARGIN)
    assert c.info["divergent"].tolist() == [[True, True, False], [True, True, False], [True, True, False],
                                            [True, True, False], [True, True, False]]
    present = ro.view(ro.rewards, "turn")[1]
    assert torch.allclose(turn_credit(c, ro), torch.where(present, OUT[:, None] + RES_SUB + MARGIN, 0))
    assert c.level == "turn" and c.cost == Cost()
    v = a3(ro, commands=COMMANDS, similar="verb")
    assert torch.allclose(v.info["residual_term"], RES_VERB)
    # weights scale each part
    w = a3(ro, commands=COMMANDS, outcome_weight=0.0, residual_weight=2.0, margin_weight=0.5)
    assert torch.allclose(turn_credit(w, ro), torch.where(present, 2 * RES_SUB + 0.5 * MARGIN, 0))
    # mean_std_norm: the outcome over its unbiased std (sqrt(0.3))
    s = a3(ro, commands=COMMANDS, norm="mean_std_norm", eps=0.0)
    assert torch.allclose(s.info["outcome_term"], OUT / 0.3 ** 0.5)
    assert torch.allclose(estimate("a3", ro, commands=COMMANDS).token, c.token)


def test_a3_reads_commands_from_turn_text():
    # ToolWorld's text "command -> answer"; a turn of two positions joins its pieces
    ro = _case()
    T = ro.horizon
    text = [[f"{c} -> {o}" for c, o in zip(cmds, seen[1:] + ["done"])] + [""] * (T - len(cmds))
            for cmds, seen in zip(COMMANDS, SEEN)]
    ro_text = dataclasses.replace(ro, text=text)
    assert turn_commands(ro_text) == COMMANDS
    assert torch.allclose(a3(ro_text).token, a3(ro, commands=COMMANDS).token)
    two = turn_batch([[0, 1]], groups=[0], turn_len=2)
    two = dataclasses.replace(two, text=[["ope", "n  3 -> file 3 looks fine", "sub", "mit -> accepted"]])
    assert turn_commands(two) == [["open  3", "submit"]]
    assert parse_command("open  3") == ("open", "3") and parse_command("run tests") == ("run", "tests")
    assert parse_command("think") == ("think", "") and parse_command("  ") == ("", "")
    # no text and no commands: the turn's first token id
    assert turn_commands(ro)[3] == ["action 0", "action 0"]


def test_a3_without_observations_builds_the_tree_on_commands():
    ro = _case(keys=False)
    c = a3(ro, commands=COMMANDS)
    # only the observations told the two search episodes apart at turn 1 before; here they still share
    # their node (same command at turn 0), so the margins are the same numbers
    assert torch.allclose(c.info["margin_term"], MARGIN)
    # had episode 1 seen something else after open 1, it would sit alone at turn 1: margin 0 there,
    # and episodes 0 and 4 (both edit 1) no longer diverge from anyone
    keys = [list(k) for k in SEEN]
    keys[1][1] = "file 1 looks fine"
    d = a3(dataclasses.replace(ro, anchor_keys=keys), commands=COMMANDS)
    assert d.info["margin_term"][:, 1].tolist() == pytest.approx([0, 0, 1, -1, 0])


def test_a3_degenerate_input():
    # a group of one: no residual, no margin, the outcome term is the raw score (grpo's singleton rule)
    ro = turn_batch([[0, 1]], groups=[0], keys=[["a", "b"]])
    c = a3(ro, commands=[["open 1", "submit"]])
    assert turn_credit(c, ro).tolist() == [[1.0, 1.0]] and not c.info["divergent"].any()
    # a trajectory with no turn gets 0; two groups never mix
    ro = turn_batch([[0, 1], [], [0, 0]], groups=[0, 0, 1])
    c = a3(ro, commands=[["edit 1", "submit"], [], ["edit 2", "submit"]])
    assert torch.isfinite(c.token).all() and float(c.token[1].abs().sum()) == 0.0
    assert float(c.info["residual_term"].abs().sum()) == 0.0 and float(c.info["margin_term"].abs().sum()) == 0.0


def test_a3_on_toolworld_runs():
    from labkit.envs.toolworld import ToolWorld
    env = ToolWorld(3, max_turns=6)
    ro = env.sample(env.scripted_policy(2.0), 2, group_size=4, seed=0)
    c = a3(ro)
    verbs = {parse_command(x)[0] for row in c.info["commands"] for x in row}
    assert verbs <= {"think", "search", "run", "submit", "open", "edit"}
    assert torch.isfinite(c.token).all()


def test_a3_rejects_bad_input():
    ro = _case()
    with pytest.raises(ValueError, match="^similar"):
        a3(ro, similar="tree")
    with pytest.raises(ValueError, match="^norm"):
        a3(ro, norm="z")
    for option in ("outcome_weight", "residual_weight", "margin_weight", "eps"):
        with pytest.raises(ValueError, match=f"^{option}"):
            a3(ro, **{option: -1.0})
    with pytest.raises(ValueError, match="^gamma"):
        a3(ro, gamma=2.0)
    with pytest.raises(ValueError, match="^commands"):
        a3(ro, commands=COMMANDS[:4])
    with pytest.raises(ValueError, match="^commands: trajectory 3 has 2 turns"):
        a3(ro, commands=COMMANDS[:3] + [["search"]] + COMMANDS[4:])
    with pytest.raises(TypeError, match="^commands"):
        a3(ro, commands=COMMANDS[:3] + [["search", 3]] + COMMANDS[4:])
    with pytest.raises(TypeError, match="^command"):
        parse_command(3)
