"""The estimator contract: every estimator is a function ``fn(rollouts, **options) -> Credit``,
registered by name together with everything the rest of labkit must know about it.

    @register("gae", level="token", inputs={"values": "token_values"}, status="implemented",
              paper="1506.02438", equation=r"A_t = \\delta_t + \\gamma \\lambda A_{t+1}", symbols="...")
    def gae(rollouts, *, values, gamma=1.0, lam=1.0, whiten_advantages=False) -> Credit: ...

``spec(name)`` is the recorded ``EstimatorSpec``, ``specs()`` every one in registry order. Who
reads what: ``labkit.diagnose`` runs an estimator on a user's rollouts when it needs no
``inputs`` and the data shows every feature it ``needs`` (and says why not otherwise, from the
descriptions below); ``labkit.bench`` lets it run on a task that gives every option in
``inputs``; the method cards show ``equation`` and ``symbols``; ``scripts/build_methods_csv.py
--check`` holds the inventory's status and paper to ``status`` and ``paper``; and the fuzz
harness (tests/fuzz_cases.py) builds every estimator's valid call from its input kinds.

Bad input, one rule for every estimator: a ``rollouts`` that is not a ``Rollouts`` or an option
the estimator does not have raises a TypeError naming it (the registered wrapper checks both),
and a bad option or input raises a ValueError (a TypeError for a wrong type) whose message
starts with the argument's name. The estimators' docstrings do not repeat this.
"""
from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.segments import LEVELS

__all__ = ["ESTIMATORS", "LEVELS", "STATUSES", "FEATURES", "FIELD_FEATURES", "AXES", "INPUT_KINDS", "InputKind", "EstimatorSpec",
           "register", "get_estimator", "estimate", "spec", "specs"]

Estimator = Callable[..., Credit]
ESTIMATORS: dict[str, Estimator] = {}

#: How faithful the lab's estimator is to its paper. ``adaptation``: the paper's estimator with
#: one of its components changed to fit the lab (a tabular model for an LLM of the same role, a
#: fit done once instead of online); ``stand-in``: a component the lab cannot run (an LLM judge, a
#: coach, a self-prompting model) replaced by a substitute of another nature (a noisy oracle,
#: hand-written features). Both say what they substitute in ``replaces``.
STATUSES = ("implemented", "adaptation", "stand-in")

#: What an estimator may need a batch of rollouts to show, each with what it means (the reason a
#: diagnosis gives when the data lacks it). ``labkit.diagnose`` holds the test that reads each
#: off a batch or a file.
FEATURES: dict[str, str] = {
    "groups": "some task group has two or more trajectories",
    "anchor_keys": "observation keys per step (anchor_keys)",
    "entropies": "the sampling policy's entropies",
    "logprobs": "the sampling policy's log-probabilities",
    "states": "observation states per position",
    "turns": "some trajectory has two or more turns",
    "agents": "two or more agents",
    "intermediate_rewards": "non-zero rewards before the end",
}

#: The features that are a ``Rollouts`` field an estimator cannot do without: a batch either carries
#: it or holds None there (the other features are properties of the data, and an estimator still
#: runs on a batch that lacks them, e.g. a group of one).
FIELD_FEATURES = ("anchor_keys", "entropies", "logprobs", "states")

#: What the second axis of a tensor input counts: generated-or-not positions (T), steps, turns,
#: turn boundaries (turns + 1: before the first and after every turn), agents, coalitions of
#: agents (2**agents) or of steps (2**steps), reward functions (as many as the run has), or the
#: criteria of a written rubric (as many as the rubric has).
AXES = ("position", "step", "turn", "turn_boundary", "agent", "agent_coalition", "step_coalition", "reward_function",
        "criterion")


@dataclass(frozen=True)
class InputKind:
    """What an estimator's option holds when no rollout file can: ``description`` in a reason's
    words ("a critic's value of every position"), ``form`` its type and shape, and, for a
    tensor, ``axis`` (from :data:`AXES`), what its second axis counts (None: not a tensor)."""

    description: str
    form: str
    axis: str | None = None


_OR_CALLABLE = " (or a callable rollouts -> that tensor)"

#: Every kind of input an estimator may need, by name.
INPUT_KINDS: dict[str, InputKind] = {
    "token_values": InputKind("a critic's value of every position",
                              "(B, T) float tensor" + _OR_CALLABLE, "position"),
    "turn_values": InputKind("a critic's value of every turn", "(B, n_turns) float tensor" + _OR_CALLABLE, "turn"),
    "turn_q_values": InputKind("a turn-level Q critic's value of every turn's action",
                               "(B, n_turns) float tensor", "turn"),
    "step_vines": InputKind("continuations forked from every step: the policy and a verifier",
                            "callable value_fn(rollouts, k) -> ((B, n_steps) values, Cost)"),
    "cut_vines": InputKind("continuations forked at cut points: the policy and a verifier",
                           "callable value_fn(rollouts, cuts, k) -> ((B, T) values at the cuts, Cost)"),
    "success_prob": InputKind("the policy's probability of the gold answer after every turn",
                              "(B, n_turns + 1) float tensor of probabilities" + _OR_CALLABLE, "turn_boundary"),
    "env": InputKind("an environment that restores a turn's hidden state and plays on (re-execution)",
                     "a labkit Env (labkit.core.protocols.Env), e.g. a ToolWorld"),
    "policy": InputKind("the policy that plays the re-executed turns",
                        "a labkit policy with probs(), e.g. a TabularSoftmaxPolicy"),
    "hidden_states": InputKind("the hidden state at every position (privileged, from the simulator)",
                               "(B, T) long tensor, rollouts.truth['hidden_states']", "position"),
    "step_rewriter": InputKind("a model that rewrites steps",
                               "callable rewrite_fn(rollouts, cells, k) -> (outcomes (n, k), changed (n, k), Cost)"),
    "hindsight": InputKind("a hindsight model of the outcome",
                           "(B, n_turns) float tensor of h(a_t | s_t, Z)" + _OR_CALLABLE, "turn"),
    "privileged_critic": InputKind("a critic given privileged information",
                                   "a fitted turn-advantage critic with scores(rollouts, hidden_states), "
                                   "n_actions and privileged (labkit.learn.critics.BTCritic)"),
    "turn_verdicts": InputKind("a judge's turn verdicts", "(B, n_turns) tensor in {0, 1}" + _OR_CALLABLE, "turn"),
    "step_verdicts": InputKind("a judge's step verdicts",
                               "(B, n_steps) or (critiques, B, n_steps) tensor in [0, 1]" + _OR_CALLABLE, "step"),
    "turn_grades": InputKind("a judge's turn grades", "(B, n_turns) tensor in {-1, 0, +1}" + _OR_CALLABLE, "turn"),
    "turn_roles": InputKind("a judge's role label of every turn",
                            "(B, n_turns) tensor in {0: regression, 1: plumbing, 2: exploration, 3: decisive}"
                            + _OR_CALLABLE, "turn"),
    "rubric_verdicts": InputKind("a grader's met / not met verdict on every item of a rubric",
                                 "(B, K) tensor in {0, 1}, K rubric criteria" + _OR_CALLABLE, "criterion"),
    "judged_turn_rewards": InputKind("a judge's step rewards (one per turn)",
                                     "(B, n_turns) float tensor" + _OR_CALLABLE, "turn"),
    "action_scores": InputKind("a coach model's score of every action", "(B, T) float tensor" + _OR_CALLABLE,
                               "position"),
    "agent_credit": InputKind("a critic model's credit per agent", "(B, n_agents) float tensor" + _OR_CALLABLE,
                              "agent"),
    "agent_coalition_values": InputKind("team outcomes with agents left out (re-execution)",
                                        "(B, 2**n_agents) float tensor" + _OR_CALLABLE, "agent_coalition"),
    "step_coalition_values": InputKind("outcomes of every subset of steps (a value model)",
                                       "(B, 2**n_steps) float tensor" + _OR_CALLABLE, "step_coalition"),
    "credit_function": InputKind("a written credit function (the agents' own utilities and the state in)",
                                 "callable fn(q, state, agents) -> {agent: credit}, q[agent] = its utility, "
                                 "state = the trajectory's state (a dict)"),
    "planning_mask": InputKind("which tokens are planning tokens: a labeller the file does not hold",
                               "(B, T) bool tensor", "position"),
    "ref_logprobs": InputKind("log-probabilities under a reference model",
                              "(B, T) float tensor of log-probabilities (<= 0)", "position"),
    "conditioned_logprobs": InputKind("log-probabilities under a conditioned model",
                                      "(B, T) float tensor of log-probabilities (<= 0)", "position"),
    "teacher_logprobs": InputKind("log-probabilities under a teacher (the same model given privileged context)",
                                  "(B, T) float tensor of log-probabilities (<= 0)", "position"),
    "implicit_step_rewards": InputKind("an implicit step reward model",
                                       "(B, T) float tensor" + _OR_CALLABLE, "position"),
    "irl_reward": InputKind("an inverse-RL reward model",
                            "(n_obs, n_actions) float tensor, or a callable (obs (B, N), action (B, N)) -> (B, N)"),
    "prm_step_scores": InputKind("a process reward model's step scores",
                                 "(B, n_steps) float tensor in [0, 1]" + _OR_CALLABLE, "step"),
    "verifiable_turn_rewards": InputKind("a verifier's checkable turn rewards",
                                         "(B, n_turns) float tensor" + _OR_CALLABLE, "turn"),
    "progress_states": InputKind("a checker's verified progress state at every turn boundary",
                                 "(B, n_turns + 1) float tensor" + _OR_CALLABLE, "turn_boundary"),
    "execution_feedback": InputKind("what execution reported about every turn's work",
                                    "(B, n_turns) tensor in {-1, 0, +1}" + _OR_CALLABLE, "turn"),
    "prefix_scores": InputKind("a reward model's prefix scores", "(B, T) float tensor" + _OR_CALLABLE, "position"),
    "outcome_model": InputKind("an outcome model for attribution",
                               "callable outcome_model(rollouts) -> (scores (B,), input embeddings (B, T, D))"),
    "reward_parts": InputKind("each reward function's score of every trajectory (the file's reward columns)",
                              "(B, K) float tensor, K reward functions" + _OR_CALLABLE, "reward_function"),
    "greedy_scores": InputKind("the score of the policy's greedy response to every trajectory's prompt",
                               "(B,) float tensor" + _OR_CALLABLE),
    "sum_pi_squared": InputKind("the policy's sum of squared next-token probabilities at every position",
                                "(B, T) float tensor in [0, 1], sum over the vocabulary of pi(v)^2" + _OR_CALLABLE,
                                "position"),
    "token_gradients": InputKind("every generated token's log-prob gradient (or a last-layer proxy) from the policy",
                                 "(B, T, F) float tensor of gradient features" + _OR_CALLABLE),
    "progress_contributions": InputKind("a progress model's step contributions",
                                        "(B, T) float tensor" + _OR_CALLABLE, "position"),
}

_ARXIV_ID = re.compile(r"\b\d{4}\.\d{4,5}\b")
# a paper known only by its OpenReview forum, as the inventory writes its id
_OPENREVIEW_ID = re.compile(r"\bopenreview-[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class EstimatorSpec:
    """What the lab knows about a registered estimator (see :func:`register` for each field)."""

    name: str
    fn: Estimator
    level: str
    needs: tuple[str, ...]
    inputs: Mapping[str, str]
    status: str
    replaces: str
    paper: str
    equation: str
    symbols: str

    def missing_fields(self, rollouts: Rollouts) -> list[str]:
        """The ``Rollouts`` fields this estimator needs (:data:`FIELD_FEATURES` among ``needs``)
        that ``rollouts`` does not carry."""
        return [f for f in self.needs if f in FIELD_FEATURES and getattr(rollouts, f) is None]

    @property
    def arxiv_ids(self) -> tuple[str, ...]:
        """The arXiv ids ``paper`` names, in order (none for a classic cited by author and year)."""
        return tuple(_ARXIV_ID.findall(self.paper))

    @property
    def paper_ids(self) -> tuple[str, ...]:
        """The ids ``paper`` names as the inventory keys papers: its arXiv ids, then any OpenReview
        forum ("openreview-<forum id>")."""
        return self.arxiv_ids + tuple(_OPENREVIEW_ID.findall(self.paper))


def _fail(field_: str, name: str, msg: str, kind: type[Exception] = ValueError) -> Exception:
    return kind(f"{field_}: estimator {name!r}: {msg}")


def _text(field_: str, name: str, value, *, required: bool = True) -> str:
    if not isinstance(value, str):
        raise _fail(field_, name, f"expected a str, got {type(value).__name__}", TypeError)
    if required and not value.strip():
        raise _fail(field_, name, "must not be empty")
    return value


def _check_needs(name: str, needs) -> tuple[str, ...]:
    if isinstance(needs, str) or not isinstance(needs, (tuple, list)):
        raise _fail("needs", name, f"expected a tuple of features, got {needs!r}", TypeError)
    unknown = [f for f in needs if f not in FEATURES]
    if unknown:
        raise _fail("needs", name, f"unknown feature {unknown[0]!r}; known: {sorted(FEATURES)}")
    if len(set(needs)) != len(needs):
        raise _fail("needs", name, f"a feature is listed twice: {list(needs)}")
    return tuple(needs)


def _check_inputs(name: str, inputs, fn: Callable) -> Mapping[str, str]:
    """{option: kind}: every key a parameter of ``fn``, every kind known, and every parameter
    without a default declared (what the estimator cannot run without is never implicit)."""
    if not isinstance(inputs, Mapping):
        raise _fail("inputs", name, f"expected a dict {{option: kind}}, got {type(inputs).__name__}", TypeError)
    params = inspect.signature(fn).parameters
    for option, kind in inputs.items():
        if option not in params or option == "rollouts":
            raise _fail("inputs", name, f"{option!r} is not an option of {fn.__name__}{inspect.signature(fn)}")
        if kind not in INPUT_KINDS:
            raise _fail("inputs", name, f"option {option!r} has an unknown kind {kind!r}; known: {sorted(INPUT_KINDS)}")
    required = [k for k, p in params.items() if k != "rollouts" and p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    undeclared = [k for k in required if k not in inputs]
    if undeclared:
        raise _fail("inputs", name, f"option {undeclared[0]!r} has no default, so it must be declared with its "
                                    f"kind, e.g. inputs={{{undeclared[0]!r}: ...}}")
    return MappingProxyType(dict(inputs))


def _check_equation(name: str, equation) -> str:
    """LaTeX without display-math fences (the card adds them) and with balanced braces."""
    equation = _text("equation", name, equation)
    if "$" in equation:
        raise _fail("equation", name, "write the LaTeX without $ fences (the card adds them)")
    depth = 0
    for ch in re.sub(r"\\[{}]", "", equation):   # literal \{ \} do not count
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        raise _fail("equation", name, "unbalanced braces")
    return equation


def _check_fn(name: str, fn) -> None:
    if not inspect.isfunction(fn):
        raise _fail("fn", name, f"expected a function rollouts -> Credit, got {type(fn).__name__}", TypeError)
    first = next(iter(inspect.signature(fn).parameters), None)
    if first != "rollouts":
        raise _fail("fn", name, f"the first parameter must be 'rollouts', got {first!r}", TypeError)


_NO_INPUTS: Mapping[str, str] = MappingProxyType({})
# a required field left out gets the registry's own error, which names it first (Python's
# "missing keyword-only argument" does not)
_REQUIRED: str = "<required>"


def register(name: str, *, level: str = _REQUIRED, needs: tuple[str, ...] = (),
             inputs: Mapping[str, str] = _NO_INPUTS, status: str = _REQUIRED, replaces: str = "",
             paper: str = _REQUIRED, equation: str = _REQUIRED, symbols: str = _REQUIRED
             ) -> Callable[[Estimator], Estimator]:
    """Register ``fn(rollouts, **options) -> Credit`` as ``name`` with its :class:`EstimatorSpec`.

    ``level``: the level the estimator assigns credit at, one of :data:`LEVELS`; the ``Credit``
    its default call returns has that level. ``needs``: features of the rollouts it reads, from
    :data:`FEATURES`. ``inputs``: ``{option: kind}`` for every option it needs that no rollout
    holds, kinds from :data:`INPUT_KINDS`; every option without a default must be there.
    ``status``: one of :data:`STATUSES`; ``replaces``: what the lab substitutes for the paper's
    component (required for an adaptation or a stand-in, empty otherwise). ``paper``: the
    arXiv id, or a citation such as "Williams 1992" ("; " between several). ``equation``: the
    key equation in LaTeX, as labkit computes it; ``symbols``: what its symbols are.

    Every field is checked; an error starts with the field's name and names the estimator.
    The registered function checks that ``rollouts`` is a ``Rollouts`` and that every keyword
    is one of its options (a TypeError naming the argument otherwise).
    """
    _text("name", str(name), name)
    if not name.isidentifier():
        raise ValueError(f"name: expected a Python identifier such as 'my_credit', got {name!r}")
    if name in ESTIMATORS:
        raise ValueError(f"name: estimator {name!r} is registered twice")
    for field_, value in (("level", level), ("status", status), ("paper", paper), ("equation", equation),
                          ("symbols", symbols)):
        if value is _REQUIRED:
            raise _fail(field_, name, "required (see labkit.credit.registry.register)", TypeError)
    if level not in LEVELS:
        raise _fail("level", name, f"must be one of {LEVELS}, got {level!r}")
    needs = _check_needs(name, needs)
    if status not in STATUSES:
        raise _fail("status", name, f"must be one of {STATUSES}, got {status!r}")
    replaces = _text("replaces", name, replaces, required=False)
    if status != "implemented" and not replaces.strip():
        raise _fail("replaces", name, f"a {status} says what the lab substitutes for the paper's component")
    if status == "implemented" and replaces.strip():
        raise _fail("replaces", name, "an implemented estimator substitutes nothing; use status 'adaptation' "
                                      "or 'stand-in'")
    paper = _text("paper", name, paper)
    if "\n" in paper:
        raise _fail("paper", name, "one line: arXiv ids or citations, '; ' between several")
    equation = _check_equation(name, equation)
    symbols = _text("symbols", name, symbols)

    def wrap(fn: Estimator) -> Estimator:
        _check_fn(name, fn)
        declared = _check_inputs(name, inputs, fn)
        if name in ESTIMATORS:
            raise ValueError(f"name: estimator {name!r} is registered twice")
        params = inspect.signature(fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        options = sorted(k for k, p in params.items() if k != "rollouts" and p.kind is not inspect.Parameter.VAR_KEYWORD)

        @functools.wraps(fn)
        def checked(rollouts, *args, **kwargs):
            check_rollouts(rollouts, "an env's sample(), or built with labkit.core.rollouts.Rollouts")
            unknown = [] if takes_any else [k for k in kwargs if k not in params]
            if unknown:
                raise TypeError(f"{unknown[0]}: {name} has no option {unknown[0]!r}; its options are {options}")
            return fn(rollouts, *args, **kwargs)

        checked.estimator_name = name
        checked.spec = EstimatorSpec(name=name, fn=checked, level=level, needs=needs, inputs=declared,
                                     status=status, replaces=replaces, paper=paper, equation=equation,
                                     symbols=symbols)
        ESTIMATORS[name] = checked
        return checked
    return wrap


def get_estimator(name: str) -> Estimator:
    if not isinstance(name, str):
        raise TypeError(f"name: expected an estimator's registered name (a str), got {type(name).__name__}")
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"name: no estimator {name!r}; known: {sorted(ESTIMATORS)}") from None


def spec(name: str) -> EstimatorSpec:
    """The :class:`EstimatorSpec` of the estimator registered as ``name``."""
    return get_estimator(name).spec


def specs() -> list[EstimatorSpec]:
    """Every registered estimator's spec, in registry order."""
    return [fn.spec for fn in ESTIMATORS.values()]


def estimate(name: str, rollouts: Rollouts, **kwargs) -> Credit:
    """Run the estimator registered as ``name``."""
    return get_estimator(name)(rollouts, **kwargs)
