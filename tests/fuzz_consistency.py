"""Fuzz probes of cross-object consistency (added to ``fuzz_cases.build_probes``).

Two kinds, each derived from signatures or the registry so that a new entry point of the same
shape is probed without anyone writing its case:

1. A truth (or env, belief, credit) built for one world or policy paired with another's
   rollouts: every public method of a truth class that takes ``rollouts``; every registered
   estimator with a ``truth`` option (its exact mode); every function of the oracle and luck
   modules that takes ``rollouts`` beside a ``truth``, ``env``, ``belief`` or ``credits``.
   Expected: a ValueError/TypeError naming one of the paired arguments.
2. Tables that are not what they claim: every registered estimator option named ``pi`` and
   every function of the hindsight module taking ``pi`` (a policy table: non-negative rows
   summing to 1 within 1e-6) given an unnormalised, negative, NaN, complex or 1-D table.
   Expected: a clear error naming ``pi``; a table within the tolerance is accepted.

Like ``fuzz_cases`` this module imports labkit only when ``probes()`` runs.
"""
from __future__ import annotations

import inspect
from typing import Any

import fuzz_cases as fc
from fuzz_cases import Probe

GROUP = "consistency"

# Probes that miss their expected class on purpose (probe id -> observed class), merged into
# fuzz_cases.KNOWN_GAPS by ``probes()`` so the regression test marks them strict xfails (none).
KNOWN_GAPS: dict[str, str] = {}

_CACHE: dict[str, Any] = {}


def _worlds() -> dict[str, Any]:
    """The paired objects, built once: a ToolWorld with its policy, truth and batch, the same for
    worlds with more files and more turns, a truth of another policy, and two chains."""
    if _CACHE:
        return _CACHE
    import torch
    from labkit.envs import BifurcationChain, ToolWorld
    from labkit.envs.tabular import exact_truth
    from labkit.policies.tabular import TabularSoftmaxPolicy
    env, pol, ro = fc.toolworld()
    c = _CACHE
    c.update(env=env, pol=pol, ro=ro, truth=env.truth(pol))
    for key, kw in (("files", {"n_files": env.n_files + 2}), ("turns", {"max_turns": env.max_turns + 3})):
        w = ToolWorld(**kw)
        p = w.scripted_policy()
        c[key] = (w, p, w.truth(p), w.sample(p, 2, group_size=2, seed=1))
    other = env.make_policy(seed=3)
    c["other_policy"] = (other, env.truth(other))
    for h in (5, 8, 3):
        ch = BifurcationChain(horizon=h)
        cp = TabularSoftmaxPolicy(ch.n_states, ch.n_actions)
        c[f"chain{h}"] = (ch, cp, exact_truth(ch.mdp(), cp), ch.sample(cp, 4, seed=0))
    c["torch"] = torch
    return c


def _public_rollouts_methods(obj) -> list[str]:
    """Public methods of a truth object whose first parameter is ``rollouts``."""
    out = []
    for name, member in inspect.getmembers(type(obj), inspect.isfunction):
        if name.startswith("_"):
            continue
        params = list(inspect.signature(member).parameters)
        if len(params) >= 2 and params[1] == "rollouts":
            out.append(name)
    return sorted(out)


# --------------------------------------------------------------------------- kind 1: truth methods
def truth_method_probes() -> list[Probe]:
    c = _worlds()
    torch = c["torch"]
    probes: list[Probe] = []
    ch, _, t5, r5 = c["chain5"]
    tool = c["truth"]
    ro = c["ro"]
    foreign = {
        "Truth": (t5, r5, [
            ("rollouts of a longer chain (state ids out of range)", lambda: c["chain8"][3]),
            ("rollouts of a shorter chain (the episode cannot end there)", lambda: c["chain3"][3]),
            ("state ids shifted past n_states", lambda: r5.with_(states=r5.states + 1000)),
            ("action ids past n_actions", lambda: r5.with_(tokens=torch.full_like(r5.tokens, ch.n_actions))),
            ("plain hand-built rollouts", lambda: fc.plain()),
            ("ToolWorld rollouts", lambda: ro),
        ]),
        "ToolTruth": (tool, ro, [
            ("rollouts of a ToolWorld with more turns", lambda: c["turns"][3]),
            ("rollouts of a ToolWorld with more files", lambda: c["files"][3]),
            ("rollouts of a chain", lambda: r5),
        ]),
    }
    for cls, (truth, good, variants) in foreign.items():
        methods = _public_rollouts_methods(truth)
        for meth in methods:
            f = getattr(truth, meth)
            probes.append(Probe(GROUP, f"{cls}.{meth}", "matching rollouts (valid)", lambda f=f, good=good: f(good),
                                "edge", ("rollouts",), None))
            for desc, make in variants:
                probes.append(Probe(GROUP, f"{cls}.{meth}", desc, lambda f=f, make=make: f(make()), "invalid",
                                    ("rollouts",)))
        # the value_fn a truth hands to Monte Carlo credit reads the same rollouts
        vf = truth.step_value_fn()
        for desc, make in variants:
            probes.append(Probe(GROUP, f"{cls}.step_value_fn()", desc, lambda vf=vf, make=make: vf(make(), 1),
                                "invalid", ("rollouts",)))
    hidden = ro.truth["hidden_states"]
    probes += [
        Probe(GROUP, "ToolTruth.hidden_q", "hidden index past the table",
              lambda: tool.hidden_q(torch.zeros_like(hidden), torch.full_like(hidden, 10 ** 6)), "invalid", ("hidden",)),
        Probe(GROUP, "ToolTruth.hidden_q", "negative hidden index",
              lambda: tool.hidden_q(torch.zeros_like(hidden), torch.full_like(hidden, -1)), "invalid", ("hidden",)),
        Probe(GROUP, "ToolTruth.hidden_q", "negative turn",
              lambda: tool.hidden_q(torch.full_like(hidden, -1), hidden.clamp(min=0)), "invalid", ("turn",)),
    ]
    return probes


# --------------------------------------------------------------------------- kind 1: estimators' exact truth
def estimator_truth_probes() -> list[Probe]:
    """Every registered estimator with a ``truth`` option, run in its exact mode with the truth
    of another world or policy."""
    from labkit.credit import ESTIMATORS
    c = _worlds()
    ro, pol = c["ro"], c["pol"]
    probes: list[Probe] = []
    for name in sorted(ESTIMATORS):
        fn = ESTIMATORS[name]
        params = inspect.signature(fn).parameters
        if "truth" not in params:
            continue
        mode = {"mode": "exact"} if "mode" in params else {}

        def run(truth, name=name, fn=fn, mode=mode, **over):
            kw = fc.estimator_inputs(name, ro) | mode | {"truth": truth} | over
            return fn(ro, **kw)

        probes.append(Probe(GROUP, name, "exact truth of the same world and policy (valid)",
                            lambda run=run: run(c["truth"]), "edge", ("truth",), tuple(ro.tokens.shape)))
        variants = [
            ("truth of a world with more files", lambda: c["files"][2], {}),
            ("truth of a world with more turns", lambda: c["turns"][2], {}),
            ("truth of another policy (policy given)", lambda: c["other_policy"][1], {"policy": pol}),
            ("truth of another policy (policy not given)", lambda: c["other_policy"][1], {"policy": None}),
            ("truth of a tabular chain", lambda: c["chain5"][2], {}),
            ("truth None", lambda: None, {}),
        ]
        for desc, make, over in variants:
            probes.append(Probe(GROUP, name, desc, lambda run=run, make=make, over=over: run(make(), **over),
                                "invalid", ("truth",)))
    return probes


# --------------------------------------------------------------------------- kind 1: (truth|env, rollouts) functions
PAIRED = ("truth", "env", "belief", "credits")
ORACLE_MODULES = ("labkit.envs.toolworld.truth", "labkit.scoring.luck")


def _fills() -> dict[str, Any]:
    """A valid value of every parameter name the paired functions take."""
    from labkit.credit import ESTIMATORS
    from labkit.envs.toolworld.belief import belief_truth
    c = _worlds()
    ro = c["ro"]
    return {"env": c["env"], "truth": c["truth"], "rollouts": ro, "policy": c["pol"],
            "hidden_states": ro.truth["hidden_states"], "credits": {"GRPO": ESTIMATORS["grpo"](ro)},
            "belief": belief_truth(c["env"], c["truth"], ro)}


def _foreign() -> dict[str, list[tuple[str, Any]]]:
    """Values of the paired parameters that belong to another world, policy or batch."""
    from labkit.credit import ESTIMATORS
    from labkit.envs.toolworld.belief import belief_truth
    c = _worlds()
    w, p, tr, r = c["files"]
    return {
        "truth": [("truth of a world with more files", c["files"][2]), ("truth of a world with more turns", c["turns"][2]),
                  ("truth of a tabular chain", c["chain5"][2])],
        "env": [("env with more files", c["files"][0]), ("env with more turns", c["turns"][0])],
        "rollouts": [("rollouts of a world with more files", r), ("rollouts of a world with more turns", c["turns"][3])],
        "credits": [("credit of another batch", {"GRPO": ESTIMATORS["grpo"](c["turns"][3])})],
        "belief": [("belief of another batch", belief_truth(w, tr, r))],
    }


def paired_function_probes() -> list[Probe]:
    import importlib
    fills = _fills()
    foreign = _foreign()
    probes: list[Probe] = []
    for modname in ORACLE_MODULES:
        mod = importlib.import_module(modname)
        for fname, fn in inspect.getmembers(mod, inspect.isfunction):
            if fname.startswith("_") or fn.__module__ != modname:
                continue
            params = inspect.signature(fn).parameters
            required = [p for p, par in params.items() if par.default is inspect.Parameter.empty]
            if "rollouts" not in required or not set(PAIRED) & set(required):
                continue
            if not all(p in fills for p in required):
                continue
            args = tuple(p for p in required if p in (*PAIRED, "rollouts", "policy", "hidden_states"))

            def call(fn=fn, required=required, **over):
                return fn(**{p: over.get(p, fills[p]) for p in required})

            for p in required:
                for desc, val in foreign.get(p, []):
                    probes.append(Probe(GROUP, fname, f"{p}: {desc}", lambda call=call, p=p, val=val: call(**{p: val}),
                                        "invalid", args))
    return probes


# --------------------------------------------------------------------------- kind 2: probability tables
def _bad_tables(good) -> list[tuple[str, Any]]:
    torch = _worlds()["torch"]
    neg = good.clone()
    neg[0, 0], neg[0, 1] = neg[0, 0] + 0.5, neg[0, 1] - 0.5
    if neg.shape[1] < 2:
        neg[0, 0] = -0.5
    nan = good.clone()
    nan[0, 0] = float("nan")
    return [("rows sum to 2", good * 2), ("a negative entry", neg), ("rows sum to 0.999", good * 0.999),
            ("NaN entry", nan), ("complex dtype", good.to(torch.complex128)), ("1-D table", good[0])]


def table_probes() -> list[Probe]:
    """Every registered estimator option named ``pi`` and every hindsight function taking
    ``pi``: bad tables refused by name, a table within the 1e-6 row tolerance accepted."""
    from labkit.credit import ESTIMATORS
    from labkit.credit import hindsight
    c = _worlds()
    torch = c["torch"]
    probes: list[Probe] = []
    for name in sorted(ESTIMATORS):
        fn = ESTIMATORS[name]
        if "pi" not in inspect.signature(fn).parameters:
            continue
        base = fc.base_rollouts(name)
        if fc.toolworld_only(name):
            good = c["pol"].probs().detach().to(torch.float64)
        else:
            width = int(max(base.states.max(), base.tokens.max())) + 1
            good = torch.full((width, width), 1.0 / width, dtype=torch.float64)

        def run(pi, name=name, fn=fn, base=base):
            return fn(base, **(fc.estimator_inputs(name, base) | {"pi": pi}))

        for desc, table in _bad_tables(good):
            probes.append(Probe(GROUP, name, f"pi: {desc}", lambda run=run, table=table: run(table), "invalid", ("pi",)))
    # plain functions of the hindsight module that take a table
    ro = fc.plain()
    width = int(max(ro.states.max(), ro.tokens.max())) + 1
    good = torch.full((width, width), 1.0 / width, dtype=torch.float64)
    for fname, fn in inspect.getmembers(hindsight, inspect.isfunction):
        if fname.startswith("_") or fn.__module__ != hindsight.__name__ or "pi" not in inspect.signature(fn).parameters:
            continue
        if fname in ESTIMATORS:
            continue
        probes.append(Probe(GROUP, fname, "pi: rows within 1e-6 of 1 (valid)",
                            lambda fn=fn: fn(ro, pi=good * (1 + 5e-7)), "edge", ("pi",)))
        for desc, table in _bad_tables(good):
            probes.append(Probe(GROUP, fname, f"pi: {desc}", lambda fn=fn, table=table: fn(ro, pi=table),
                                "invalid", ("pi",)))
    return probes


def probes() -> list[Probe]:
    """All probes of this group; registers this group's known gaps in ``fuzz_cases.KNOWN_GAPS``."""
    fc.KNOWN_GAPS.update(KNOWN_GAPS)
    return truth_method_probes() + estimator_truth_probes() + paired_function_probes() + table_probes()
