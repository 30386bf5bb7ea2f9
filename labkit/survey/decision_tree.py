"""The practitioner's method-selection tree: one specification drives both logic and drawing.

:data:`QUESTIONS` and :data:`LEAVES` are the whole tree: each question says how to read its
answer off the inputs, which branch each answer takes and where the node is drawn; each leaf
holds its method class, candidates, caveats and position. :func:`recommend` walks the spec from
:data:`ROOT`; :func:`decision_tree_graph` turns the same spec into nodes and edges for
``labkit.viz.tree_chart``. To change the tree, edit the spec, never the two functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Callable, NamedTuple

import pandas as pd

__all__ = [
    "REASONING_MAX_TOKENS", "AGENTIC_MIN_TOKENS", "DecisionInputs", "Recommendation",
    "Branch", "Question", "Caveat", "Leaf", "ROOT", "QUESTIONS", "LEAVES", "recommend",
    "decision_tree_graph",
]

#: Trajectories shorter than this many tokens are the reasoning regime.
REASONING_MAX_TOKENS = 30_000
#: Trajectories longer than this many tokens are the agentic regime; in between is hybrid.
AGENTIC_MIN_TOKENS = 100_000
#: The survey's Table 8 puts 10K-30K-token chains of thought in a separate "hard math" row.
_LONG_COT_TOKENS = 10_000
#: Candidates that fork continuations from intermediate prefixes or states, i.e. need replay.
_NEEDS_FORKING = frozenset({"VinePPO", "SPO", "TEMPO", "Math-Shepherd"})


@dataclass(frozen=True)
class DecisionInputs:
    """Answers to the tree's questions, validated.

    ``trajectory_tokens``: typical tokens per episode (prompt excluded), an integer >= 1.
    ``reward_density``: ``"outcome"`` (only a final verdict) or ``"per_step"`` (intermediate
    steps can be checked). ``stochastic_env``: does the same action from the same state lead to
    different results? ``can_replay``: can training restart an episode from a saved
    intermediate state? ``privileged_info``: does training have information the agent will
    not see at inference (gold answers, hidden state)?
    """

    trajectory_tokens: int
    reward_density: str
    stochastic_env: bool
    can_replay: bool
    privileged_info: bool = False

    def __post_init__(self) -> None:
        tokens = self.trajectory_tokens
        if isinstance(tokens, bool) or not isinstance(tokens, (Integral, float)):
            raise TypeError(f"trajectory_tokens: expected an integer, got {tokens!r}")
        if isinstance(tokens, float) and not tokens.is_integer():
            raise ValueError(f"trajectory_tokens: must be a whole number, got {tokens!r}")
        if tokens < 1:
            raise ValueError(f"trajectory_tokens: must be >= 1, got {tokens!r}")
        object.__setattr__(self, "trajectory_tokens", int(tokens))
        if self.reward_density not in ("outcome", "per_step"):
            raise ValueError(f"reward_density: must be 'outcome' or 'per_step', "
                             f"got {self.reward_density!r}")
        for name in ("stochastic_env", "can_replay", "privileged_info"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name}: expected True or False, got {value!r}")


@dataclass
class Recommendation:
    """What :func:`recommend` returns.

    ``leaf`` is a key of :data:`LEAVES`; ``candidates`` are method names present in
    ``methods.csv`` or ``baselines.csv``; ``path`` lists the (question, answer) pairs walked from
    the root; ``caveats`` are warnings specific to the inputs (may be empty), and
    ``caveat_about[i]`` the inputs caveat i depends on (empty: it always applies).
    """

    regime: str
    method_class: str
    rationale: str
    candidates: list[str]
    path: list[tuple[str, str]]
    leaf: str
    caveats: list[str] = field(default_factory=list)
    inputs: DecisionInputs | None = None
    caveat_about: list[tuple[str, ...]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The specification
# --------------------------------------------------------------------------------------------

class Branch(NamedTuple):
    """One way out of a question: taken when the question's ``ask`` returns ``answer``."""
    answer: str
    edge: str   # label drawn on the edge
    says: str   # answer recorded in Recommendation.path; "{tokens:,}" is filled in
    to: str     # id of the next question, or a key of LEAVES


class Question(NamedTuple):
    """An inner node: ``ask`` reads the answer off the inputs, ``branches`` say where it leads."""
    text: str   # as recorded in Recommendation.path
    label: str  # as drawn in the node
    x: float
    y: float
    ask: Callable[[DecisionInputs], str]
    branches: tuple[Branch, ...]


class Caveat(NamedTuple):
    """A warning a leaf adds when ``when(inputs)`` holds, optionally with extra candidates.
    ``about``: the inputs it depends on (a report built from measurements shows it only when
    those were measured or stated, never about a default nobody chose)."""
    when: Callable[[DecisionInputs], bool]
    text: str
    adds: tuple[str, ...] = ()
    about: tuple[str, ...] = ()


class Leaf(NamedTuple):
    """One outcome of the tree: the method class, the inventory methods that realise it, where
    it is drawn, and the caveats it raises for answers the path did not ask about."""
    regime: str
    method_class: str
    candidates: tuple[str, ...]
    rationale: str
    x: float
    y: float
    caveats: tuple[Caveat, ...] = ()


def _regime(d: DecisionInputs) -> str:
    if d.trajectory_tokens < REASONING_MAX_TOKENS:
        return "reasoning"
    return "hybrid" if d.trajectory_tokens <= AGENTIC_MIN_TOKENS else "agentic"


def _yes_no(name: str) -> Callable[[DecisionInputs], str]:
    return lambda d: "yes" if getattr(d, name) else "no"


#: The first question asked; every walk and every drawn path starts here.
ROOT = "length"

#: The inner nodes, in drawing order. Edges are drawn in the order of the branches.
QUESTIONS: dict[str, Question] = {
    "length": Question(
        "How many tokens does one trajectory have?", "Tokens per trajectory?", 3.7, 0, _regime,
        (Branch("reasoning", "< 30K", "{tokens:,}: under 30K, reasoning regime", "density"),
         Branch("hybrid", "30K-100K", "{tokens:,}: 30K-100K, hybrid regime", "stochastic"),
         Branch("agentic", "> 100K", "{tokens:,}: over 100K, agentic regime", "replay"))),
    "density": Question(
        "Is the reward only the final outcome, or can each step be checked?",
        "Reward: outcome only,\nor per-step checkable?", 1.0, 1, lambda d: d.reward_density,
        (Branch("outcome", "outcome", "outcome only", "reasoning/outcome"),
         Branch("per_step", "per step", "each step can be checked", "reasoning/per_step"))),
    "stochastic": Question(
        "Is the environment stochastic?", "Environment\nstochastic?", 3.5, 1,
        _yes_no("stochastic_env"),
        (Branch("no", "no", "no", "hybrid/deterministic"),
         Branch("yes", "yes", "yes", "hybrid/stochastic"))),
    "replay": Question(
        "Can you replay from intermediate states?", "Can you replay from\nintermediate states?",
        6.0, 1, _yes_no("can_replay"),
        (Branch("yes", "yes", "yes", "agentic/replay"),
         Branch("no", "no", "no", "privileged"))),
    "privileged": Question(
        "Is privileged information (gold answers, hidden state) available in training?",
        "Privileged info\nat train time?", 6.8, 2, _yes_no("privileged_info"),
        (Branch("yes", "yes", "yes", "agentic/privileged"),
         Branch("no", "no", "no, pure online", "agentic/online"))),
}

# Shared by both reasoning leaves: group comparisons assume the policy is the only randomness.
_STOCHASTIC_REASONING = Caveat(
    lambda d: d.stochastic_env,
    "The reasoning branch assumes the model's own sampling is the only randomness. With a "
    "stochastic environment, group comparisons also reward lucky environment draws; consider "
    "the value-model advice of the hybrid branch.", about=("stochastic_env",))

# Where the lab departs from the post's drawing, which files every hindsight method under replay.
_HINDSIGHT_WITHOUT_REPLAY = Caveat(
    lambda d: True,
    "Departs from the post's drawing: HCAPO is hindsight, not replay. It re-weighs each turn with "
    "a model's reading of the finished trajectory and needs no re-execution (survey §5.2; notebook "
    "08 computes it from a table lookup), so the lab offers it with and without replay.")

#: The seven leaves of the practitioner's tree. Candidates are names from ``methods.csv`` or
#: ``baselines.csv``, cross-checked against the survey's Table 8 scenario rows.
#: A leaf's caveats are reported in the order listed, before the replay caveat of recommend().
LEAVES: dict[str, Leaf] = {
    "reasoning/outcome": Leaf(
        "reasoning", "GRPO / group-relative baseline",
        ("GRPO", "RLOO", "Dr. GRPO", "SPO"),
        "A single deterministic generation with only a final verdict: sampling several answers "
        "per prompt and comparing each with its siblings gives a cheap, critic-free baseline, "
        "and policy sampling is the only source of variance so the comparison is fair. SPO "
        "refines it to segments by forking from cut points when finer credit is worth the "
        "extra samples (Table 8, math reasoning).",
        0.3, 2, (
            _STOCHASTIC_REASONING,
            Caveat(lambda d: d.trajectory_tokens >= _LONG_COT_TOKENS,
                   "Chains of 10K-30K tokens are the survey's 'hard math' row (Table 8: VinePPO, "
                   "HICRA, CAPO); episode-level credit is spread very thin there.",
                   adds=("HICRA", "VinePPO"), about=("trajectory_tokens",)))),
    "reasoning/per_step": Leaf(
        "reasoning", "Process reward model (step-level rewards)",
        ("PURE", "SPRO", "Math-Shepherd", "CAPO"),
        "Intermediate steps can be checked, so score them: a PRM (trained from Monte Carlo "
        "labels as in Math-Shepherd, derived from the policy as in SPRO, or an LLM verifier as "
        "in CAPO) turns one verdict into step rewards. Combine them with a minimum rather than "
        "a sum (PURE) so padding with harmless steps cannot be rewarded.",
        1.7, 2, (_STOCHASTIC_REASONING,)),
    "hybrid/deterministic": Leaf(
        "hybrid", "VinePPO / segment-level Monte Carlo",
        ("VinePPO", "SPO", "TEMPO", "GiGPO"),
        "Long trajectories but a deterministic environment: restarting from an intermediate "
        "state reproduces it exactly, so values can be measured by sampling continuations "
        "instead of trusting a learned critic. GiGPO is the cheap alternative when identical "
        "states recur across rollouts.",
        2.9, 2),
    "hybrid/stochastic": Leaf(
        "hybrid", "PPO + trained value model",
        ("GAE", "AgentPRM", "ArCHer", "Turn-PPO"),
        "With stochastic tools a re-run from the same state can end differently for reasons the "
        "policy did not cause, so sampled comparisons mix luck into credit. A value model "
        "trained on many transitions averages that noise out and separates what the policy "
        "controls from what the environment does.",
        4.1, 2, (
            Caveat(lambda d: d.privileged_info,
                   "You have privileged information at training time: the survey's web-navigation "
                   "row (Table 8: SWEET-RL, HCAPO, IGPO) suggests comparing a privileged critic "
                   "such as SWEET-RL.", about=("privileged_info",)),)),
    "agentic/replay": Leaf(
        "agentic", "Hindsight / counterfactual analysis",
        ("HCAPO", "C3", "CCPO"),
        "Long, tool-heavy episodes where you can return to a saved state: compare what happened "
        "with what would have happened had one turn been different, or re-weigh each action by "
        "how likely it looks once the outcome is known, and give credit to the decisions that "
        "changed the result.",
        5.2, 2, (
            Caveat(lambda d: d.privileged_info,
                   "Privileged information is also available: a privileged critic (SWEET-RL, "
                   "CriticSearch) is complementary to counterfactual replay and cheaper per "
                   "episode.", about=("privileged_info",)),
            Caveat(lambda d: d.stochastic_env,
                   "In a stochastic environment a single replay per counterfactual is noisy; "
                   "average several re-runs before crediting a turn.", about=("stochastic_env",)),
            _HINDSIGHT_WITHOUT_REPLAY)),
    "agentic/privileged": Leaf(
        "agentic", "Privileged asymmetric critic",
        ("SWEET-RL", "CriticSearch", "IGPO"),
        "No replay, but training runs know things the agent will not (the gold answer, hidden "
        "environment state): a critic given that information can localise blame turn by turn "
        "while the actor still sees only its own observations. IGPO uses the gold answer in "
        "the same spirit, paying each turn for raising its probability.",
        6.2, 3),
    "agentic/online": Leaf(
        "agentic", "Turn-level MDP reformulation",
        ("Turn-PPO", "ArCHer", "AgentPRM", "GiGPO", "CARL", "HCAPO"),
        "Only fresh online episodes: treat each whole turn as one action so values, ratios and "
        "advantages are computed per turn, shrinking the horizon from 100K tokens to tens of "
        "decisions. Critic-free options (GiGPO's state groups, CARL's focus on high-entropy "
        "actions) keep the overhead low (Table 8, tool use and software engineering).",
        7.4, 3, (
            Caveat(lambda d: True,
                   "GiGPO's step term needs identical states to recur across rollouts; where they "
                   "never do, it reduces to GRPO."),
            _HINDSIGHT_WITHOUT_REPLAY)),
}


# --------------------------------------------------------------------------------------------
# Logic and drawing, both read off the specification
# --------------------------------------------------------------------------------------------

def _walk(inputs: DecisionInputs) -> tuple[list[tuple[str, str]], str]:
    """Follow the branches from ROOT; return the (question, answer) path and the leaf key."""
    node, path = ROOT, []
    while node in QUESTIONS:
        question = QUESTIONS[node]
        answer = question.ask(inputs)
        branch = next(b for b in question.branches if b.answer == answer)
        path.append((question.text, branch.says.format(tokens=inputs.trajectory_tokens)))
        node = branch.to
    return path, node


def recommend(trajectory_tokens: int, reward_density: str, stochastic_env: bool,
              can_replay: bool, privileged_info: bool = False) -> Recommendation:
    """Walk the practitioner's decision tree and return a method class with candidates.

    Regime by trajectory length: fewer than 30,000 tokens is *reasoning*, 30,000 to 100,000
    (both ends included) is *hybrid*, more than 100,000 is *agentic*. Then:

    * reasoning: ``reward_density`` "outcome" -> GRPO / group-relative; "per_step" -> process
      reward models;
    * hybrid: deterministic -> VinePPO / segment-level Monte Carlo; stochastic -> PPO with a
      trained value model;
    * agentic: ``can_replay`` -> hindsight / counterfactual analysis; otherwise
      ``privileged_info`` -> privileged asymmetric critic; otherwise -> turn-level MDP.

    The tree asks only the questions on its path; answers it does not use can still add
    ``caveats`` (e.g. a replay-based candidate when ``can_replay`` is False). For reasoning
    chains of 10K tokens or more with outcome rewards, HICRA and VinePPO are added (the
    survey's Table 8 "hard math" row). Bad inputs raise ``TypeError``/``ValueError`` naming the
    argument.
    """
    inputs = DecisionInputs(trajectory_tokens, reward_density, stochastic_env, can_replay,
                            privileged_info)
    path, key = _walk(inputs)
    leaf = LEAVES[key]
    candidates, caveats, about = list(leaf.candidates), [], []
    for caveat in leaf.caveats:
        if caveat.when(inputs):
            caveats.append(caveat.text)
            about.append(caveat.about)
            candidates += caveat.adds
    # Applies to every leaf: some candidates are unusable without replay, whatever the path.
    if not inputs.can_replay:
        forking = [c for c in candidates if c in _NEEDS_FORKING]
        if forking:
            caveats.append(f"{', '.join(forking)} sample continuations from intermediate "
                           f"prefixes or states; you said you cannot replay, so these need that "
                           f"capability first.")
            about.append(("can_replay",))
    return Recommendation(regime=leaf.regime, method_class=leaf.method_class,
                          rationale=leaf.rationale, candidates=candidates, path=path, leaf=key,
                          caveats=caveats, inputs=inputs, caveat_about=about)


def decision_tree_graph(leaf: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes and edges of the decision tree with a fixed layout, marking the path to ``leaf``.

    Returns ``(nodes, edges)``. nodes: id, label, kind ("question"/"leaf"), x, y, active.
    edges: source, target, label, x, y, x2, y2, active. ``leaf`` is a key of :data:`LEAVES`
    (e.g. ``recommend(...).leaf``); ``None`` marks nothing.
    """
    if leaf is not None and leaf not in LEAVES:
        raise ValueError(f"leaf: must be one of {sorted(LEAVES)}, got {leaf!r}")
    spec_edges = [(qid, b.to, b.edge) for qid, q in QUESTIONS.items() for b in q.branches]
    parent = {target: source for source, target, _ in spec_edges}
    on_path: set[str] = set()
    node = leaf
    while node is not None:
        on_path.add(node)
        node = parent.get(node)
    rows = [{"id": qid, "label": q.label, "kind": "question", "x": q.x, "y": q.y}
            for qid, q in QUESTIONS.items()]
    rows += [{"id": key, "label": lf.method_class, "kind": "leaf", "x": lf.x, "y": lf.y}
             for key, lf in LEAVES.items()]
    nodes = pd.DataFrame(rows)
    nodes["active"] = nodes["id"].isin(on_path)
    pos = nodes.set_index("id")[["x", "y"]]
    edges = pd.DataFrame([{"source": s, "target": t, "label": label,
                           "x": pos.at[s, "x"], "y": pos.at[s, "y"],
                           "x2": pos.at[t, "x"], "y2": pos.at[t, "y"],
                           "active": s in on_path and t in on_path}
                          for s, t, label in spec_edges])
    return nodes, edges
