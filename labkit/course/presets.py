"""Every notebook's world settings, named in one block (in the style of CleanRL's ``Args``).

The runner modules (``nb01_reinforce_variance`` ... ``nb10_benchmark``) take their defaults
from here, so "which world does lesson N use, and why does it differ from lesson M" is answered
in one place instead of in five signatures that disagree. The notebooks still spell their
settings out in their cells (a reader sees them where they run); these are the same values.

The designed multi-agent games of notebook 09 are not repeated here: they are
``labkit.envs.teamtask.PRESETS`` (each with its story in ``PRESET_STORIES``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ChainArgs:
    """A ``BifurcationChain`` and the tabular policy playing it (``chain_setup``'s arguments)."""

    horizon: int = 20           # tokens per trajectory
    n_bifurcations: int = 2     # forks where one token is right and the rest fail the episode
    noise_std: float = 0.0      # Gaussian noise on the final reward
    slip: float = 0.0           # chance that a right token is turned into a wrong one
    init_std: float = 0.0       # std of the policy's initial logits (0 = uniform policy)


@dataclass(frozen=True)
class ToolWorldArgs:
    """A ``ToolWorld``: a bug in one of ``n_files`` files, found with unreliable tools.

    ``mislead``, ``noise`` and ``flaky`` are the three tools' error rates (search points at a
    wrong file, a file read misjudges, the test suite flips); ``kwargs()`` is what
    ``ToolWorld(n_files, **kwargs)`` takes.
    """

    n_files: int = 5
    max_turns: int = 30
    mislead: float = 0.2
    noise: float = 0.1
    flaky: float = 0.1
    step_cost: float = 0.0      # 0: a turn costs nothing
    wrong_submit: float = 0.0   # penalty for submitting a wrong file

    def kwargs(self) -> dict:
        """Everything but ``n_files`` (ToolWorld's one positional argument)."""
        kw = asdict(self)
        kw.pop("n_files")
        return kw


# --------------------------------------------------------------------------- the presets
# 01: a clean chain (no reward noise, no slips, uniform policy): the only randomness is the
#     policy's own sampling, so the variance the notebook measures comes from the horizon alone.
NB01_CHAIN = ChainArgs()

# 02: reward noise and slips make the same state end either way, so a critic has something to
#     learn (and to get wrong), and a non-uniform policy (init_std 0.5) gives states unequal
#     visits: the learned critic is poor exactly where few episodes passed.
NB02_CHAIN = ChainArgs(noise_std=0.5, slip=0.1, init_std=0.5)

# 05: one error rate 0.2 on all three tools, 30 turns: noisy enough that luck is a large share of
#     the outcome, long enough that an episode is a real multi-step search.
NB05_WORLD = ToolWorldArgs(mislead=0.2, noise=0.2, flaky=0.2)
NB05_AGENT_STRENGTH = 3.0       # scripted agent: the sensible action has probability about 0.6

# 05, echo trap: noisier tools, a sixth file, 40 turns and a broken build (-3) for a wrong
#     submit, so doing nothing until time runs out (0) is *safe* and trying is risky.
# 05, inside a turn (POAD): the same world; a discount per action makes the difference between
#     discounting per token (token-level GAE) and per action (POAD's backups) visible.
NB05_TOKEN_GAMMA = 0.9

NB05_ECHO_WORLD = ToolWorldArgs(n_files=6, max_turns=40, mislead=0.4, noise=0.3, flaky=0.3, wrong_submit=3.0)

# 06: notebook 05's noise in a larger world (eight files) with longer episodes (50 turns): long
#     episodes are where GRPO's per-episode loss averaging shows its length bias, and where an
#     agent revisits observations, which is what GiGPO's anchor groups are made of.
NB06_WORLD = ToolWorldArgs(n_files=8, max_turns=50, mislead=0.2, noise=0.2, flaky=0.2)

# 07: ToolWorld's own (milder, unequal) tool noise, 30 turns; turns and wrong submits cost
#     nothing, so exact V is a success probability, which IGPO's DP stand-in needs.
NB07_WORLD = ToolWorldArgs()
NB07_WARMUP_ITERATIONS = 20     # GRPO batches before CARL: a uniform policy has equal entropy everywhere

# 08: error rate 0.3 (more luck to remove than in 05) but only 20 turns: the re-execution
#     methods (C3, CCPO) replay every turn, so cost grows with the horizon. Returns are the
#     success flag (binary), as HCA's exact hindsight distribution needs.
NB08_WORLD = ToolWorldArgs(max_turns=20, mislead=0.3, noise=0.3, flaky=0.3)
NB08_AGENT_STRENGTH = 2.0       # a half-trained agent, less sure than notebook 05's

# 02-03: the tiny LM's RL and critic data use problems with four operands (the task's longest).
LM_OPERANDS = 4

# 10: the live benchmark is the quick suite (chain T = 10 and 40, ToolWorld 20 turns, three
#     designed teams; two seeds) on a few estimators that span the families: GRPO and RLOO
#     (episode), GiGPO (anchor groups), VinePPO (Monte Carlo vines), exact Shapley and
#     leave-one-out (multi-agent). About two seconds on one core; the full run is cached.
NB10_SUITE = "quick"
NB10_LIVE_ESTIMATORS = ("grpo", "rloo", "gigpo", "vineppo", "shapley", "leave_one_out")
NB10_CARD_ESTIMATOR = "vineppo"   # the method whose checklist card the notebook shows first
NB10_BASELINE = "grpo"            # the episode-level baseline a card compares against
