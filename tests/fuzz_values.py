"""Fuzz probes of values a well-shaped input can still hold wrong: complex numbers, a Credit whose
fields disagree in shape, rewards too large for their dtype, and an option of 0 where an
estimator may divide by it (``eps`` on groups of equal scores, a temperature, a beta, a scale).

Every table is derived, not listed: the Rollouts fields from a built batch, the Credit levels from
``labkit.core.segments.LEVELS``, the float dtypes from torch, and the estimators and their options
from the registry and their signatures, so a new field, level or estimator is probed without a
case written for it. ``probes()`` is added to ``fuzz_cases.build_probes()``.
"""
from __future__ import annotations

import inspect
from dataclasses import fields

import fuzz_cases as fc
from fuzz_cases import Probe

GROUP = "values"
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# dtypes the estimators run on at the edge of the limit (the lab's default and verl's)
RUN_DTYPES = ("float32", "float64")


def _plain_estimators() -> list[str]:
    from labkit.credit import ESTIMATORS
    return [n for n in sorted(ESTIMATORS) if not fc.toolworld_only(n)]


def _run(name: str, ro, **over):
    from labkit.credit import ESTIMATORS
    kw = fc.estimator_inputs(name, ro)
    kw.update(over)
    return ESTIMATORS[name](ro, **kw)


def complex_probes() -> list[Probe]:
    """Every tensor a Rollouts or a Credit holds, and every tensor their methods take, as complex
    numbers: refused by name (a cast would drop the imaginary part with only a warning)."""
    import torch
    from labkit.core.credit import Credit
    from labkit.core.rollouts import Rollouts
    from labkit.core.segments import LEVELS
    base = fc.plain()
    B, T = base.tokens.shape
    kw0 = {f.name: getattr(base, f.name) for f in fields(Rollouts)}
    probes = []
    for f in fields(Rollouts):
        if not isinstance(kw0[f.name], torch.Tensor):
            continue

        def call(name=f.name):
            kw = dict(kw0)
            kw[name] = kw0[name].to(torch.complex64)
            return Rollouts(**kw)
        probes.append(Probe(GROUP, "Rollouts", f"{f.name}: complex dtype", call, "invalid", (f.name,)))
    cplx = torch.zeros(B, T, dtype=torch.complex128)
    probes.append(Probe(GROUP, "Credit.from_tokens", "token: complex dtype",
                        lambda: Credit.from_tokens(base, cplx, "m"), "invalid", ("token",)))
    for level in LEVELS:
        probes.append(Probe(GROUP, "Credit.from_level", f"values at level {level}: complex dtype",
                            lambda level=level: Credit.from_level(base, cplx, level, "m"), "invalid", ("values",)))
        probes.append(Probe(GROUP, "Rollouts.broadcast", f"values at level {level}: complex dtype",
                            lambda level=level: base.broadcast(cplx, level), "invalid", ("values",)))
        probes.append(Probe(GROUP, "Rollouts.view", f"values to level {level}: complex dtype",
                            lambda level=level: base.view(cplx, level), "invalid", ("values",)))
    ok = torch.zeros(B, T)
    for name in ("token", "values"):
        def direct(name=name):
            parts = {"token": ok, "values": ok}
            parts[name] = cplx
            return Credit(parts["token"], "token", parts["values"], base.mask, "m")
        probes.append(Probe(GROUP, "Credit", f"direct: {name} complex dtype", direct, "invalid", (name,)))
    return probes


def credit_shape_probes() -> list[Probe]:
    """At every level, a Credit built directly whose token, values and present disagree in shape:
    refused naming the field; the same fields as ``Credit.from_level`` made them: accepted."""
    import torch
    from labkit.core.credit import Credit
    from labkit.core.segments import LEVELS
    ro = fc.plain()
    B, T = ro.tokens.shape
    probes = []
    for level in LEVELS:
        def made(level=level):
            return Credit.from_level(ro, torch.ones(B, T, dtype=torch.float64), level, "m")

        def rebuild(change, level=level):
            c = made(level)
            parts = {"token": c.token, "values": c.values, "present": c.present}
            parts.update(change(parts))
            return Credit(parts["token"], c.level, parts["values"], parts["present"], "m")
        cases = [
            ("values with one row more", lambda p: {"values": torch.cat([p["values"], p["values"][:1]]),
                                                    "present": torch.cat([p["present"], p["present"][:1]])},
             ("values",)),
            ("values 1-D", lambda p: {"values": p["values"][:, 0], "present": p["present"][:, 0]}, ("values",)),
            ("values 3-D", lambda p: {"values": p["values"][..., None], "present": p["present"][..., None]},
             ("values",)),
            ("present of another shape", lambda p: {"present": p["present"][:, :0]}, ("present",)),
            ("token 1-D", lambda p: {"token": p["token"].reshape(-1)}, ("token",)),
            ("token with one row fewer", lambda p: {"token": p["token"][:-1]}, ("token", "values")),
        ]
        if level == "token":
            cases.append(("values narrower than token", lambda p: {"values": p["values"][:, :-1],
                                                                   "present": p["present"][:, :-1]}, ("values",)))
        for desc, change, args in cases:
            probes.append(Probe(GROUP, "Credit", f"direct at level {level}: {desc}",
                                lambda change=change, rebuild=rebuild: rebuild(change), "invalid", args))
        probes.append(Probe(GROUP, "Credit", f"direct at level {level}: fields of from_level",
                            lambda rebuild=rebuild: rebuild(lambda p: {}), "edge", ("token",), (B, T)))
    return probes


def magnitude_probes() -> list[Probe]:
    """Rewards of every float dtype whose batch sums overflow that dtype: refused naming
    ``rewards``; just inside the limit (one reward per row, or a reward at every generated
    position): every estimator on plain Rollouts gives finite credit."""
    import torch
    from labkit.core.rollouts import Rollouts
    base = fc.plain()
    B, T = base.tokens.shape
    outcome = base.mask & (base.rewards != 0)
    probes = []
    for dt_name in FLOAT_DTYPES:
        dt = getattr(torch, dt_name)
        top = torch.finfo(dt).max
        for desc, value in (("half the largest value", top / 2), ("the largest value", top),
                            ("minus the largest value", -top)):
            def call(dt=dt, value=value):
                rw = torch.where(outcome, torch.tensor(value, dtype=torch.float64), 0.0).to(dt)
                return Rollouts(tokens=base.tokens, mask=base.mask, rewards=rw, group_ids=base.group_ids)
            probes.append(Probe(GROUP, "Rollouts", f"rewards: {dt_name} at {desc}", call, "invalid", ("rewards",)))
    for dt_name in RUN_DTYPES:
        dt = getattr(torch, dt_name)
        for where, sel in (("one reward per row", outcome), ("a reward at every position", base.mask)):
            # T times the total |reward| just below the dtype's largest value
            value = 0.999 * torch.finfo(dt).max / (T * int(sel.sum()))

            def batch(dt=dt, sel=sel, value=value):
                rw = torch.where(sel, torch.tensor(value, dtype=torch.float64), 0.0).to(dt)
                return base.with_(rewards=rw)
            probes.append(Probe(GROUP, "Rollouts", f"rewards: {dt_name} just inside the limit, {where}",
                                lambda batch=batch: batch().tokens, "edge", ("rewards",), (B, T)))
            for name in _plain_estimators():
                if name in fc.BINARY_OUTCOME:
                    continue
                probes.append(Probe(GROUP, name,
                                    f"rewards: {dt_name} just inside the limit, {where}",
                                    lambda name=name, batch=batch: _run(name, batch()), "edge",
                                    ("rewards", "rollouts"), (B, T)))
    return probes


def zero_option_probes() -> list[Probe]:
    """Every float option of every registered estimator set to 0 (the divisors among them:
    eps, beta, tau, temperatures, scales): a clear refusal naming the option, or finite
    credit, on a batch with varied scores and on one whose groups are all equal (where ``eps`` =
    0 meets a std of 0: such a group's advantage is 0, ``labkit.core.stats.group_normalize``)."""
    from labkit.credit import ESTIMATORS
    probes = []
    for name in sorted(ESTIMATORS):
        sig = inspect.signature(ESTIMATORS[name])
        batches = [("varied scores", lambda name=name: fc.base_rollouts(name))]
        if not fc.toolworld_only(name):
            batches.append(("all-equal groups", lambda: fc.plain(rewards="const")))
        for opt, par in sig.parameters.items():
            if isinstance(par.default, bool) or not isinstance(par.default, float):
                continue
            for desc, make in batches:

                def call(name=name, make=make, opt=opt):
                    return _run(name, make(), **{opt: 0.0})
                shape = tuple(make().tokens.shape)
                probes.append(Probe(GROUP, name, f"{opt}=0 on {desc}", call, "either",
                                    (opt,), shape))
    return probes


def group_normalize_probes() -> list[Probe]:
    """The shared group statistics with eps = 0 on groups of equal values (with and without a
    group of one): finite, shaped like the input."""
    import torch
    from labkit.core.stats import group_normalize
    cases = [
        ("all equal", torch.ones(4, dtype=torch.float64), torch.tensor([0, 0, 1, 1])),
        ("all equal, a group of one", torch.full((3,), 2.5), torch.tensor([0, 0, 1])),
        ("all zero", torch.zeros(4), torch.zeros(4, dtype=torch.long)),
    ]
    probes = []
    for desc, v, g in cases:
        for singleton in ("raw", "zero"):
            probes.append(Probe(GROUP, "group_normalize", f"eps=0, {desc}, singleton={singleton}",
                                lambda v=v, g=g, singleton=singleton: group_normalize(v, g, eps=0.0,
                                                                                      singleton=singleton),
                                "edge", ("eps",), tuple(v.shape)))
    return probes


def probes() -> list[Probe]:
    return (complex_probes() + credit_shape_probes() + magnitude_probes() + zero_option_probes()
            + group_normalize_probes())
