"""Fuzz probes of sizes and objects (added to ``fuzz_cases.build_probes``).

Five kinds, each derived from signatures so that a new entry point of the same shape is probed
without anyone writing its case:

1. Sizes that exhaust memory: every public function of ``labkit.core.games`` that takes a
   number of players ``n`` gets 40 (a 2**40 table: terabytes), and every one that takes a
   coalition table (``values``, ``values_or_fn``) gets one with 2**25 columns (a zero-stride
   view, so the probe itself allocates nothing); the least core also a table over its exact
   limit. Expected: a clear refusal naming the argument before anything is allocated.
2. Missing or wrong objects: every public function, method or learner class of the learning
   loop, the learners and the worlds (chain, ToolWorld, TeamTask) with an argument named
   ``policy``, ``policies``, ``learner`` or ``make_learner`` gets None, a string and a number
   there, the other arguments filled with valid values by name. Expected: a TypeError naming
   the argument (not an AttributeError from inside a loop).
3. A number where a setting name is expected: every string-valued option of ``train``,
   ``policy_loss`` and the worlds' constructors gets 3 and a list.
4. Helpers on bad counts: the same ``n`` functions as kind 1 get -1, 2.5, a string and None.
5. Infinite bounds and fractional counts: every numeric parameter of ``viz.slider`` gets +-inf;
   every ``labkit.scoring`` function with a top-k ``k`` gets 1.5 as a tensor and as a numpy
   float.

Like ``fuzz_cases`` this module imports labkit only when ``probes()`` runs.
"""
from __future__ import annotations

import inspect
from typing import Any

import fuzz_cases as fc
from fuzz_cases import Probe

GROUP = "objects"
OBJECT_ARGS = ("policy", "policies", "learner", "make_learner")
KNOWN_GAPS: dict[str, str] = {}


def _public_functions(module) -> list[tuple[str, Any]]:
    return [(name, obj) for name, obj in vars(module).items()
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == module.__name__]


def _params(fn) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


# --------------------------------------------------------------------------- kinds 1 and 4: games
def _game_probes() -> list[Probe]:
    import torch
    from labkit.core import games
    probes: list[Probe] = []
    huge = torch.zeros(1, dtype=torch.float64).expand(2 ** (games.MAX_PLAYERS + 1))  # no memory behind it
    over_core = torch.zeros(2 ** (games.LEAST_CORE_MAX_PLAYERS + 1), dtype=torch.float64)
    for name, fn in _public_functions(games):
        params = _params(fn)
        if "n" in params and list(params)[0] == "n":
            for desc, v in (("n = 40 (2**40 coalitions)", 40), ("n = -1", -1), ("n = 2.5", 2.5),
                            ("n a string", "x"), ("n None", None)):
                probes.append(Probe(GROUP, name, desc, lambda fn=fn, v=v: fn(v), "invalid", ("n",)))
        table = next((p for p in ("values", "values_or_fn") if p in params), None)
        if table is not None:
            n_big = games.MAX_PLAYERS + 1
            kw = {table: huge}
            if "n_permutations" in params:
                kw["n_permutations"] = 2
            if "name" in params:  # a checking helper: its errors name what the caller passes as name
                kw["name"] = table
            probes.append(Probe(GROUP, name, f"{table} with 2**{n_big} columns", lambda fn=fn, kw=kw: fn(**kw),
                                "invalid", (table,)))
        if name in ("least_core", "nucleolus"):
            probes.append(Probe(GROUP, name, f"exact over {games.LEAST_CORE_MAX_PLAYERS + 1} players",
                                lambda fn=fn: fn(over_core), "invalid", ("values",)))
    probes.append(Probe(GROUP, "sampled_shapley", "callable with n = 63 players",
                        lambda: games.sampled_shapley(lambda m: m.double(), 63, n_permutations=2), "invalid", ("n",)))
    probes.append(Probe(GROUP, "least_core", "n_sampled over the constraint limit",
                        lambda: games.least_core(over_core, n_sampled=games.LEAST_CORE_MAX_CONSTRAINTS), "invalid",
                        ("n_sampled",)))
    probes.append(Probe(GROUP, "least_core", "coalitions over the constraint limit",
                        lambda: games.least_core(over_core, coalitions=torch.arange(1, games.LEAST_CORE_MAX_CONSTRAINTS + 2)),
                        "invalid", ("coalitions",)))
    probes.append(Probe(GROUP, "popcount", "n = 12", lambda: games.popcount(12), "edge", ("n",), (2 ** 12,)))
    return probes


# --------------------------------------------------------------------------- kind 2: objects
def _worlds() -> dict[str, Any]:
    import torch
    from labkit.envs import BifurcationChain
    from labkit.policies.tabular import TabularSoftmaxPolicy
    env, pol, ro = fc.toolworld()
    team, pols, rt = fc.teamtask()
    chain = BifurcationChain(horizon=5)
    return {"env": env, "pol": pol, "ro": ro, "team": team, "pols": pols, "chain": chain,
            "cpol": TabularSoftmaxPolicy(chain.n_states, chain.n_actions), "torch": torch}


def _fill(owner: str, name: str, w: dict) -> Any:
    """A valid value of a required argument, by the entry's owner and the argument's name."""
    torch = w["torch"]
    env = w["env"]
    table = {
        "n": 4, "n_tasks": 1, "k": 2, "states": torch.tensor([0, 1]),
        "rollouts": w["ro"], "demos": w["ro"], "estimator": "grpo",
        "runs": {"grpo": lambda learner: {"estimator": "grpo", "iterations": 1}},
        "bug": torch.tensor([0]), "fixed": torch.zeros(1, env.n_files, dtype=torch.bool),
        "obs": torch.tensor([0]), "turn": torch.tensor([0]),
        "noise": torch.zeros(1, env.max_turns, 3, dtype=torch.float64),
        "hidden": torch.zeros(1, env.max_turns, dtype=torch.long),
        "actions": torch.zeros(1, env.max_turns, dtype=torch.long),
        "present": torch.ones(1, env.max_turns, dtype=torch.bool),
    }
    if name == "env":
        if owner in ("BifurcationChain", "ChainLearner"):
            return w["chain"]
        if owner in ("TeamTask", "TeamLearner"):
            return w["team"]
        if owner in ("exact_outcomes", "exact_credit"):
            from labkit.course.presets import echo_world
            return echo_world()
        return env
    if name == "policy":
        return w["cpol"] if owner in ("BifurcationChain", "ChainLearner") else w["pol"]
    if name == "policies":
        return w["pols"]
    if name in ("learner", "make_learner"):
        from labkit.envs.chain.learner import ChainLearner
        make = lambda seed=0: ChainLearner(w["chain"], w["cpol"], batch_size=4, group_size=2)  # noqa: E731
        return make() if name == "learner" else make
    if name in table:
        return table[name]
    raise KeyError(name)


def _bad_objects(arg: str, w: dict) -> list[tuple[str, Any]]:
    out = [("None", None), ("a string", "x"), ("a number", 3)]
    if arg == "policies":
        out.append(("a list of None", [None] * len(w["pols"])))
    if arg == "make_learner":
        out = [("None", None), ("a function returning None", lambda seed: None)]
    return out


def _object_entries():
    """(owner, label, callable taking keyword arguments, its parameters) for every entry point
    of the learning loop, the learners and the worlds that takes a policy or a learner."""
    import importlib
    import pkgutil
    import labkit.learn as L
    mods = [importlib.import_module(f"labkit.learn.{m.name}") for m in pkgutil.iter_modules(L.__path__)]
    mods += [importlib.import_module(m) for m in ("labkit.envs.chain.env", "labkit.envs.toolworld.env",
                                                  "labkit.envs.teamtask.env", "labkit.envs.chain.learner",
                                                  "labkit.envs.toolworld.learner", "labkit.envs.teamtask.learner")]
    out = []
    for mod in mods:
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                out.append((name, name, obj, None))
            elif inspect.isclass(obj):
                out.append((name, name, obj, None))
                for meth, f in vars(obj).items():
                    if not meth.startswith("_") and inspect.isfunction(f):
                        out.append((name, f"{name}.{meth}", f, obj))
    return out


def _object_probes() -> list[Probe]:
    w = _worlds()
    instances = {"BifurcationChain": w["chain"], "ToolWorld": w["env"], "TeamTask": w["team"]}
    probes: list[Probe] = []
    for owner, label, fn, cls in _object_entries():
        params = _params(fn.__init__ if inspect.isclass(fn) else fn)
        hits = [p for p in params if p in OBJECT_ARGS]
        if not hits:
            continue
        if cls is not None and owner not in instances:
            continue
        required = [p for p, spec in params.items() if p != "self" and spec.default is inspect.Parameter.empty
                    and spec.kind in (spec.POSITIONAL_OR_KEYWORD, spec.KEYWORD_ONLY)]
        try:
            good = {p: _fill(owner, p, w) for p in required}
        except KeyError:
            continue
        target = getattr(instances[owner], fn.__name__) if cls is not None else fn
        extra = {"progress": False} if "progress" in params else {}
        if "iterations" in params and label in ("train",):
            extra["iterations"] = 1
        for arg in hits:
            for desc, bad in _bad_objects(arg, w):
                kw = {**good, **extra, arg: bad}
                probes.append(Probe(GROUP, label, f"{arg} {desc}", lambda target=target, kw=kw: target(**kw),
                                    "invalid", (arg,)))
    return probes


# --------------------------------------------------------------------------- kind 3: setting names
def _setting_probes() -> list[Probe]:
    import torch
    from labkit.envs import BifurcationChain, TeamTask, ToolWorld
    from labkit.envs.chain.learner import ChainLearner
    from labkit.learn.loop import policy_loss, train
    chain = BifurcationChain(horizon=5)
    from labkit.policies.tabular import TabularSoftmaxPolicy
    learner = ChainLearner(chain, TabularSoftmaxPolicy(chain.n_states, chain.n_actions), batch_size=4, group_size=2)
    B, T = 2, 3
    lp = -torch.ones(B, T) * 0.5
    m = torch.ones(B, T, dtype=torch.bool)
    entries = {
        "train": (lambda **kw: train(learner, "grpo", iterations=1, progress=False, **kw), train),
        "policy_loss": (lambda **kw: policy_loss(lp, lp, torch.zeros(B, T), m, **kw), policy_loss),
        "TeamTask": (lambda **kw: TeamTask(**kw), TeamTask.__init__),
        "ToolWorld": (lambda **kw: ToolWorld(**kw), ToolWorld.__init__),
        "BifurcationChain": (lambda **kw: BifurcationChain(**kw), BifurcationChain.__init__),
    }
    probes: list[Probe] = []
    for label, (call, fn) in entries.items():
        for p, spec in _params(fn).items():
            if isinstance(spec.default, str):
                for desc, bad in (("an int", 3), ("a list", [spec.default])):
                    probes.append(Probe(GROUP, label, f"setting {p} {desc}", lambda call=call, p=p, bad=bad: call(**{p: bad}),
                                        "invalid", (p,)))
    return probes


# --------------------------------------------------------------------------- kind 5: bounds and k
def _bound_probes() -> list[Probe]:
    import numpy as np
    import torch
    from labkit import scoring, viz
    probes: list[Probe] = []
    base = {"min": 0.0, "max": 1.0, "step": 0.1, "value": 0.5}
    for p in _params(viz.slider):
        if p in base:
            for desc, bad in (("inf", float("inf")), ("-inf", float("-inf"))):
                probes.append(Probe(GROUP, "slider", f"{p} {desc}",
                                    lambda p=p, bad=bad: viz.slider("x", **{**base, p: bad}), "invalid", (p, "x")))
    ro = fc.plain()
    c = torch.where(ro.mask, torch.randn(ro.mask.shape, generator=torch.Generator().manual_seed(1)), 0.0)
    targets = torch.zeros_like(ro.mask)
    targets[0, 0] = True
    for name, fn in _public_functions(scoring.agreement):
        if "k" not in _params(fn):
            continue
        for desc, bad in (("k 1.5 as a tensor", torch.tensor(1.5)), ("k 2.5 as a numpy float", np.float64(2.5)),
                          ("k 1.5", 1.5)):
            probes.append(Probe(GROUP, name, desc, lambda fn=fn, bad=bad: fn(c, ro.mask, targets, k=bad), "invalid", ("k",)))
    return probes


def probes() -> list[Probe]:
    """Every probe of this module; its KNOWN_GAPS are merged into ``fuzz_cases.KNOWN_GAPS``."""
    fc.KNOWN_GAPS.update(KNOWN_GAPS)
    return _game_probes() + _object_probes() + _setting_probes() + _bound_probes()
