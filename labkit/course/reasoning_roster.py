"""The reasoning-side estimators of notebook 04's cross-family table, set up for the tiny LM: one
``Method`` per estimator (``reasoning_methods``), the settings its explorer moves (``Knobs``) and
the models they need besides the rollouts (``load_models``).

It lives beside the lessons, not in one, because notebook 04's lesson and the script that caches
the table on a larger sample (``scripts/build_family_hits.py``) run the same roster; the lesson
(``labkit.course.nb04_process_rewards``) hands its names on to the notebook.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Sequence

import torch

from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts


@dataclass(frozen=True)
class Method:
    """One row of the cross-family table: an estimator run with fixed settings.

    ``run(rollouts) -> Credit`` computes the credit; ``family`` is the survey's methodology
    family, ``notebook`` where the lab teaches it, ``setup`` what had to exist before the call
    (a trained critic, a reward model, a tuned policy) and what that cost, ``estimator`` the
    registered name it runs, whose ``status`` (implemented, adaptation, stand-in) the table shows:
    the registry says it, nothing here repeats it.
    """

    name: str
    family: str
    notebook: str
    estimator: str
    run: Callable[[Rollouts], Credit] = field(repr=False)
    setup: str = ""

    @property
    def status(self) -> str:
        """The registered estimator's status (``labkit.credit.spec``)."""
        from labkit.credit import spec

        return spec(self.estimator).status


def one_group(rollouts: Rollouts) -> Rollouts:
    """The rollouts as one group. The reference rollouts answer 32 different problems (groups of
    one, where a group baseline has nothing to compare with); as in notebook 03, group-based
    baselines treat the 32 as one group."""
    return rollouts.with_(group_ids=torch.zeros(rollouts.batch_size, dtype=torch.long))


def with_cost(credit: Credit, extra: Cost) -> Credit:
    """``credit`` with ``extra`` added to its cost: for work done before the estimator call (the
    log-probs an implicit-reward estimator takes as an argument) that it cannot count itself."""
    return dataclasses.replace(credit, cost=credit.cost + extra)


def load_models(env, *, critic_rollouts: int = 512, critic_steps: int = 80, seed: int = 0,
                progress: bool = True) -> SimpleNamespace:
    """Everything the reasoning-side estimators need besides the rollouts, in one namespace.

    * ``critic``: PPO's value head, fitted live as in notebook 02 (``labkit.learn.lm_runs.fit_lm_critic``);
    * ``prm`` / ``orm``: the shipped process and outcome reward models
      (``scripts/train_reward_models.py``, ``data/reward_models``);
    * ``dpo``: the DPO-tuned copy of the policy, ``treg``: the copy taught T-REG's conditioning
      tokens (``scripts/train_implicit_lm.py``, ``data/implicit_lm``).
    """
    from labkit.learn.lm_runs import fit_lm_critic
    from labkit.learn.reward_models import OutcomeRewardModel, ProcessRewardModel

    critic, history = fit_lm_critic(env, n_rollouts=critic_rollouts, steps=critic_steps, seed=seed,
                                    progress=progress)
    return SimpleNamespace(critic=critic, critic_history=history, prm=ProcessRewardModel.load(),
                           orm=OutcomeRewardModel.load(), dpo=env.tuned("dpo"), treg=env.tuned("treg"))


def _scored_tokens(rollouts: Rollouts) -> int:
    """Token positions one forward pass over every rollout (prompt + response) processes."""
    return sum(len(p) for p in rollouts.info["prompt_ids"]) + int(rollouts.mask.sum())


@dataclass(frozen=True)
class Knobs:
    """The settings notebook 04's explorer moves; each method reads the ones that matter to it.

    ``k``: vines per prefix (VinePPO, Math-Shepherd, SPO), forks per branch point (TEMPO) or
    rewrites per step (InT); ``threshold``: SPO's cut probability; ``temperature``: PURE's
    soft-minimum temperature; ``beta``: the log-ratio scale of the implicit rewards (From r to
    Q*, SPRO); ``error_rate``: CAPO's stand-in verifier's chance of flipping a verdict.
    """

    k: int = 9
    threshold: float = 0.9
    temperature: float = 0.1
    beta: float = 0.1
    error_rate: float = 0.1
    seed: int = 0


KNOB_USE = {"k": ("VinePPO", "Math-Shepherd", "SPO", "TEMPO", "InT"), "threshold": ("SPO",),
            "temperature": ("PURE min-form",), "beta": ("From r to Q*", "SPRO"), "error_rate": ("CAPO",)}


def reasoning_methods(env, models: SimpleNamespace, knobs: Knobs = Knobs()) -> list[Method]:
    """Every reasoning-side estimator in the lab, set up for the tiny LM's reference rollouts.

    Notebooks 01-03's (GRPO, PPO's GAE, VinePPO, Math-Shepherd) and notebook 04's, in the
    course's order; ``models`` is ``load_models(env)``. Log-probabilities an estimator takes as an
    argument are computed inside ``run`` and their forward passes added to its cost, so the
    table compares whole recipes. Group baselines see the 32 rollouts as one group
    (``one_group``); TEMPO grows its own tree around each rollout.
    """
    from labkit.credit import get_estimator
    from labkit.envs.arithmetic.labels import planning_mask
    from labkit.learn.judges import stand_in_step_verifier

    est = get_estimator
    kn = knobs

    def logprob_cost(ro, n_models):
        return Cost(policy_forwards=n_models * ro.batch_size, policy_tokens=n_models * _scored_tokens(ro))

    def dpo_q(ro):
        credit = est("dpo_implicit_q")(ro, logprobs=models.dpo.rollout_logprobs(ro), ref_logprobs=env.rollout_logprobs(ro),
                                       beta=kn.beta)
        return with_cost(credit, logprob_cost(ro, 2))

    def spro(ro):
        credit = est("spro")(one_group(ro), logprobs=models.dpo.rollout_logprobs(ro),
                             ref_logprobs=env.rollout_logprobs(ro), beta=kn.beta)
        return with_cost(credit, logprob_cost(ro, 2))

    def t_reg(ro):
        credit = est("t_reg")(ro, better_logprobs=models.treg.rollout_logprobs(ro, condition="better"),
                              worse_logprobs=models.treg.rollout_logprobs(ro, condition="worse"))
        return with_cost(credit, logprob_cost(ro, 2))

    def capo(ro):
        # a callable verifier, so capo counts its calls (one per response)
        return est("capo")(one_group(ro), verdicts=lambda r: stand_in_step_verifier(r, error_rate=kn.error_rate,
                                                                                     seed=kn.seed))

    s = kn.seed
    return [
        Method("GRPO", "episode", "01", "grpo", lambda ro: est("grpo")(one_group(ro))),
        Method("PPO: GAE from a learned critic", "td", "02", "gae", lambda ro: est("gae")(ro, values=models.critic, lam=1.0),
               setup="value head fitted on 512 rollouts (notebook 02)"),
        Method("VinePPO", "mc", "03", "vineppo", lambda ro: est("vineppo")(ro, value_fn=env.value_fn(seed=s + 1), k=kn.k)),
        Method("Math-Shepherd labels", "mc", "03", "math_shepherd",
               lambda ro: est("math_shepherd")(ro, value_fn=env.value_fn(seed=s + 2), k=kn.k)),
        Method("SPO", "mc", "04", "spo", lambda ro: est("spo")(ro, value_fn=env.cut_value_fn(seed=s + 3), k=kn.k,
                                                       threshold=kn.threshold)),
        Method("TEMPO", "mc", "04", "tempo", lambda ro: est("tempo")(ro, tree_fn=env.tree_fn(seed=s + 4), branching=kn.k)),
        Method("PURE min-form", "process", "04", "pure",
               lambda ro: est("pure")(one_group(ro), step_scores=models.prm.step_scores, form="min",
                                      temperature=kn.temperature),
               setup="PRM trained offline on Monte Carlo step labels"),
        Method("PURE sum-form", "process", "04", "pure",
               lambda ro: est("pure")(one_group(ro), step_scores=models.prm.step_scores, form="sum"),
               setup="PRM trained offline on Monte Carlo step labels"),
        Method("SPRO", "process", "04", "spro", spro, setup="DPO-tuned policy against the base model"),
        Method("CAPO", "judge", "04", "capo", capo, setup="stand-in verifier: exact step verdicts, flipped at random"),
        Method("From r to Q*", "implicit", "04", "dpo_implicit_q", dpo_q, setup="DPO-tuned policy against the base model"),
        Method("T-REG", "implicit", "04", "t_reg", t_reg, setup="a copy taught 'better' / 'worse' conditioning tokens"),
        Method("RED", "redistribution", "04", "red", lambda ro: est("red")(ro, scores=models.orm.prefix_scores),
               setup="outcome reward model trained offline"),
        Method("ACPO attribution", "redistribution", "04", "acpo",
               lambda ro: est("acpo")(ro, outcome_model=env.outcome_attribution_fn(models.orm)),
               setup="outcome reward model trained offline"),
        Method("HICRA", "entropy_information", "04", "hicra",
               lambda ro: est("hicra")(one_group(ro), planning_mask=planning_mask(ro))),
        Method("InT", "counterfactual", "04", "int_interventions",
               lambda ro: est("int_interventions")(ro, rewrite_fn=env.step_rewrite_fn(seed=s + 5), k=kn.k)),
    ]


def later_methods(env, models: SimpleNamespace, knobs: Knobs = Knobs()) -> list[Method]:
    """The reasoning-side estimators published after the survey that run on the tiny LM, each on
    the inputs the benchmark's LM task hands it (``labkit.bench.later_inputs.lm_inputs``). Group
    baselines see the 32 rollouts as one group, as in ``reasoning_methods``; the forks and
    scoring passes an estimator needs are in its cost.
    Temporal Scheduling is left out: it is a schedule over training, and the benchmark scores
    its stages (notebook 10)."""
    from labkit.bench.later_inputs import lm_inputs
    from labkit.credit import get_estimator

    est, s = get_estimator, knobs.seed

    def run_with_inputs(name, grouped=False):
        """The estimator on the benchmark LM task's inputs for it (labkit.bench.later_inputs),
        with the forward passes those inputs took added to its cost."""
        def run(ro):
            inputs, overrides, _, costs = lm_inputs(env, ro, vars(models), seed=s + 6)
            given = {option: inputs[option] for option in est(name).spec.inputs if option in inputs}
            if name == "grail":   # the benchmark hands every estimator this engine input
                given["sum_pi_squared"] = env.rollout_sum_pi_squared(ro)
            credit = est(name)(one_group(ro) if grouped else ro, **(given | overrides.get(name, {})))
            return with_cost(credit, costs[name]) if name in costs else credit
        return run

    return [
        Method("GRPO-lambda", "td", "04", "grpo_lambda", lambda ro: est("grpo_lambda")(one_group(ro))),
        Method("RUDDER", "redistribution", "04", "rudder", run_with_inputs("rudder"),
               setup="outcome reward model trained offline, read at every prefix"),
        Method("Progress Advantage", "implicit", "04", "progress_advantage", run_with_inputs("progress_advantage"),
               setup="DPO-tuned policy against the base model"),
        Method("SC-GRPO", "privileged", "04", "sc_grpo", run_with_inputs("sc_grpo", grouped=True),
               setup="stand-in self-conditioning: the T-REG copy with its 'better' token"),
        Method("STARE", "entropy_information", "04", "stare", lambda ro: est("stare")(one_group(ro))),
        Method("PAPO", "entropy_information", "04", "papo", lambda ro: est("papo")(one_group(ro))),
        Method("DelTA", "redistribution", "04", "delta", run_with_inputs("delta", grouped=True),
               setup="one scoring pass for the token gradients"),
        Method("KTAE", "group", "04", "ktae", lambda ro: est("ktae")(one_group(ro))),
        Method("GRAIL", "redistribution", "04", "grail", run_with_inputs("grail", grouped=True),
               setup="gradient x input of the model's own answer log-probability"),
        Method("OmegaPRM", "mc", "04", "omegaprm", run_with_inputs("omegaprm")),
        Method("TreeRL", "mc", "04", "treerl", run_with_inputs("treerl")),
        Method("APPO", "mc", "04", "appo", run_with_inputs("appo")),
        Method("SCRL", "process", "04", "scrl", run_with_inputs("scrl"),
               setup="the arithmetic verifier checks every intermediate sum"),
        Method("PRIME", "implicit", "04", "prime", run_with_inputs("prime", grouped=True),
               setup="DPO-tuned copy as the implicit PRM, trained offline"),
    ]


#: the later methods' credits on the 32 reference rollouts, cached by scripts/build_later_credits.py
LATER_CREDITS_SCRIPT = "build_later_credits.py"


def write_later_credits(credits: dict, folder) -> None:
    """Write ``credits`` (method name -> ``Credit`` from ``timed_run``) to ``folder``: every
    tensor in ``credits.safetensors``, level, estimator, cost and seconds in ``credits.json``
    (the caller stamps the folder's meta)."""
    import json
    from pathlib import Path

    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors, meta = {}, {}
    for name, c in credits.items():
        for field_name in ("token", "values", "present"):
            tensors[f"{name}/{field_name}"] = getattr(c, field_name).detach().clone().contiguous()
        meta[name] = {"level": c.level, "method": c.method, "cost": c.cost.as_dict(), "seconds": c.info["seconds"]}
    save_file(tensors, str(folder / "credits.safetensors"))
    (folder / "credits.json").write_text(json.dumps(meta, indent=1) + "\n")


def load_later_credits(folder=None) -> dict:
    """The cached credits of ``later_methods`` on the 32 reference rollouts (method name ->
    ``Credit`` with ``info["seconds"]``, ready for ``cross_family_table``'s ``credits``), from
    ``folder`` (default ``data/later_credits``). Raises if the cache is missing, foreign or stale."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    from labkit.core.cache import read_cache
    from labkit.core.paths import data_path

    _, files = read_cache(Path(folder) if folder is not None else data_path("later_credits"),
                          script=LATER_CREDITS_SCRIPT, files=["credits.safetensors", "credits.json"],
                          what="cached credits of the methods after the survey")
    tensors = load_file(str(files["credits.safetensors"]))
    out = {}
    for name, m in json.loads(files["credits.json"].read_text()).items():
        out[name] = Credit(token=tensors[f"{name}/token"], level=m["level"], values=tensors[f"{name}/values"],
                           present=tensors[f"{name}/present"], method=m["method"], cost=Cost(**m["cost"]),
                           info={"seconds": m["seconds"]})
    return out


def method_by_name(methods: Sequence[Method], name: str) -> Method:
    """The method called ``name`` (ValueError listing the names otherwise)."""
    for m in methods:
        if m.name == name:
            return m
    raise ValueError(f"name: no method {name!r}; choose from {[m.name for m in methods]}")
