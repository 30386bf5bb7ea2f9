"""labkit's estimators as verl advantage estimators (verl: Sheng et al. 2024, arXiv:2409.19256).

verl computes advantages with functions registered in ``verl.trainer.ppo.core_algos`` and picks
one by name (``algorithm.adv_estimator=...`` in a verl config). Every function here has verl's
signature: it takes verl's tensors

    token_level_rewards (bs, response_length) float, response_mask (bs, response_length) 0/1,
    index (bs,) the prompt uid of each response (verl's ``data.non_tensor_batch["uid"]``),
    config (verl's ``AlgoConfig``, or any mapping / object with ``gamma``, ``lam``,
    ``norm_adv_by_std_in_grpo``)

builds a :class:`~labkit.core.rollouts.Rollouts` from them (rewards on generated positions,
group ids from the uids), calls the labkit estimator and returns verl's pair ``(advantages,
returns)``, both (bs, response_length), 0 off the mask, on the device and in the dtype the
rewards came in. GRPO, Dr. GRPO, RLOO, GPG and pass@k GRPO read nothing but each response's
score and group, so for them the ``Rollouts`` has one position per response holding its score,
and the episode values the estimator returns are painted on verl's mask in one multiplication:
the same advantages bit for bit (off the mask a negative advantage is -0.0, as in verl), at
about the cost of verl's vectorised estimators (``benchmarks/verl_speed.py``). :func:`register`
registers them with verl's ``register_adv_est`` as ``labkit_<name>``::

    import labkit.bridges.verl as lb
    lb.register()            # then: algorithm.adv_estimator=labkit_grpo

verl is an optional extra (``pip install 'labkit[verl]'``): this module imports without it and
imports verl only inside :func:`register`.

What the bridge checks, and what it trusts. verl calls an estimator on every training batch, so
the ``Rollouts`` is built without the re-validation ``Rollouts`` does on arbitrary input (which,
with the default step / turn / agent labels it builds, costs about 4 ms on 1024 x 512, ten times
verl's own GRPO). Still checked, because verl does not guarantee them or they cost nothing:
rewards are a 2-D float tensor, the mask has their shape, rewards are finite and 0 off the mask
(one fused pass, ``r - r * mask``, whose min and max are both 0 exactly when both hold; a
non-finite reward is reported as such, naming ``token_level_rewards``), the batch is not empty,
and there is one uid per response. Skipped, because verl builds these itself:

* the mask being 0/1: verl's ``response_mask`` is its attention mask's response part. Any
  non-zero entry counts as generated, and the credit is multiplied by the mask as given, which is
  what verl's own estimators do with it;
* at least one generated position in the batch (``Rollouts`` refuses an all-zero mask): verl's
  responses have at least one token; an all-zero mask gives 0 everywhere here;
* token ids (not passed by verl, never read by these estimators): all 0, one value seen through
  a (bs, response_length) view;
* group ids are made here from the uids, so they are valid by construction, and the step /
  turn / agent labels are the defaults, built only if something reads them (the bridged
  estimators do not). ``select`` and ``with_`` of such a batch return a fully validated
  ``Rollouts``.

The uids become group ids by numbering runs of equal consecutive uids (verl repeats each
prompt's uid over its responses) when no uid starts two runs, else with ``np.unique``; the
advantages are the same bit for bit as on a fully validated ``Rollouts``
(tests/bridges/test_bridges_verl.py).

What verl's data carries decides what can be bridged. verl 0.9.1's ``compute_advantage`` hands a
registered estimator the rewards, the response mask, the uids, the config and (if present)
``reward_baselines``: enough for the episode-level estimators and REINFORCE++. ``labkit_gae`` is
registered too, but verl sends the critic's ``values`` (and creates a critic at all) only for its
own ``gae``; call it directly, or from a custom trainer that passes ``values``. The same holds for
``labkit_gdpo`` (the reward functions' keys reach only verl's own ``gdpo``) and
``labkit_optimal_token_baseline`` / ``labkit_tir_optimal_token_baseline`` (``old_log_probs`` and
``sum_pi_squared`` reach only verl's own names): each raises an error naming the missing input.
ReMax is not bridged: verl generates the greedy responses (``reward_baselines``) only for its
own ``remax``, whose advantages labkit's ``remax`` equals on every generated token (tested), so a
bridge would add nothing but the cost of a ``Rollouts`` (verl's is one reverse cumulative sum). GiGPO is not
bridged: it needs a step label and an anchor-state key per step, which verl's batch does not
carry (its multi-turn agent fork, verl-agent, adds them; a bridge would read them from there).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from labkit.core.checks import as_tensor, check_finite, check_shape
from labkit.core.rollouts import Rollouts
from labkit.core.segments import default_labels
from labkit.credit import get_estimator
from labkit.credit.episode import reinforce_pp
from labkit.credit.td import gae

__all__ = ["BRIDGED", "rollouts_from_verl", "labkit_grpo", "labkit_dr_grpo", "labkit_rloo",
           "labkit_reinforce_pp", "labkit_gae", "labkit_opo", "labkit_grpo_passk", "labkit_gpg",
           "labkit_reinforce_pp_baseline", "labkit_gdpo", "labkit_optimal_token_baseline",
           "labkit_tir_optimal_token_baseline", "register"]

INSTALL_HINT = ("labkit.bridges.verl needs verl (an optional extra): pip install 'labkit[verl]', "
                "or `make test-verl` for the tested environment (requirements-verl.txt)")


def _option(config: Any, name: str, default: Any) -> Any:
    """``config.name`` for verl's AlgoConfig (a dataclass), ``config[name]`` for a mapping; else default."""
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(name, default)
    value = getattr(config, name, None)
    if value is None and hasattr(config, "get"):
        value = config.get(name, None)
    return default if value is None else value


def _group_ids(index: Any, batch: int) -> torch.Tensor:
    """verl's uids (strings, ints, any hashable numpy array) -> group ids, (batch,) long.

    verl repeats each prompt's uid over consecutive rows, so the groups are usually runs: a run
    starts where a uid differs from the one above, and if no uid starts two runs, numbering the
    runs is a valid grouping (0.04 ms for 1024 string uids against 0.2 ms for sorting them with
    ``np.unique``). Otherwise ``np.unique``'s codes. The estimators only ask which rows share a
    group, never the code's value, so both give the same advantages bit for bit.
    """
    if index is None:
        raise ValueError("index: this estimator compares responses to the same prompt and needs verl's "
                         "uid array (data.non_tensor_batch['uid']), got None")
    uids = np.asarray(index)
    if uids.shape != (batch,):
        raise ValueError(f"index: expected one uid per response, shape ({batch},), got {uids.shape}")
    starts = np.empty(batch, dtype=bool)
    starts[:1] = True
    np.not_equal(uids[1:], uids[:-1], out=starts[1:])
    heads = uids[starts].tolist()
    try:
        runs_are_groups = len(set(heads)) == len(heads)
    except TypeError:  # unhashable uids: np.unique decides
        runs_are_groups = False
    if runs_are_groups:
        return torch.from_numpy(np.cumsum(starts, dtype=np.int64) - 1)
    return torch.from_numpy(np.unique(uids, return_inverse=True)[1].reshape(-1).astype(np.int64))


class _VerlRollouts(Rollouts):
    """A ``Rollouts`` built from verl's tensors by :func:`_trusted_rollouts`, without the
    re-validation ``Rollouts`` does (the module docstring lists what is skipped and why).

    Its step / turn / agent labels are the defaults (every generated position its own step, one
    turn, one agent), built on first read: the bridged estimators never read them, and building
    them is most of the cost of a ``Rollouts`` of verl's size (4 ms for 1024 x 512). ``select``
    and ``with_`` give a fully validated ``Rollouts``.
    """

    def _label(self, name: str) -> torch.Tensor:
        labels = self.__dict__.setdefault("_labels", {})
        if labels.get(name) is None:
            labels.update(default_labels(self.mask))
        return labels[name]

    def _set_label(self, name: str, value: Any) -> None:
        self.__dict__.setdefault("_labels", {})[name] = value

    step_ids = property(lambda self: self._label("step_ids"), lambda self, v: self._set_label("step_ids", v))
    turn_ids = property(lambda self: self._label("turn_ids"), lambda self, v: self._set_label("turn_ids", v))
    agent_ids = property(lambda self: self._label("agent_ids"), lambda self, v: self._set_label("agent_ids", v))

    def with_(self, **changes: Any) -> Rollouts:
        """A validated ``Rollouts`` with some fields replaced (as ``Rollouts.with_``)."""
        return Rollouts.with_(self.select(range(self.batch_size)), **changes)

    def returns(self, gamma: float = 1.0) -> torch.Tensor:
        """``Rollouts.returns``; the last one computed is handed out again (a copy) while its
        ``gamma``, the rewards, the mask and the returns themselves are unchanged, so REINFORCE++'s
        bridge returns the reward-to-go its estimator computed (a loop over the columns: most of
        the call) instead of computing it twice."""
        state = (gamma, self.rewards, self.rewards._version, self.mask, self.mask._version)
        kept = self.__dict__.get("_returns")
        if kept is not None and kept[1]._version == kept[2] and all(
                a is b if isinstance(a, torch.Tensor) else type(a) is type(b) and a == b
                for a, b in zip(kept[0], state)):
            return kept[1].clone()
        value = Rollouts.returns(self, gamma)
        if type(gamma) in (int, float):
            self.__dict__["_returns"] = (state, value, value._version)
        return value


def _checked(token_level_rewards: Any, response_mask: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verl's (rewards, mask) on the CPU, checked only where verl does not guarantee them (module
    docstring), and the mask as numbers in the rewards' dtype (verl's own tensor when it already
    has that dtype: the caller must not keep it)."""
    rewards = as_tensor("token_level_rewards", token_level_rewards)
    if rewards.dim() != 2 or not rewards.is_floating_point():
        raise ValueError(f"token_level_rewards: expected a float tensor (bs, response_length), "
                         f"got {tuple(rewards.shape)} {rewards.dtype}")
    mask = as_tensor("response_mask", response_mask)
    check_shape("response_mask", mask, tuple(rewards.shape))
    rewards, mask = rewards.detach().cpu(), mask.detach().cpu()
    B, T = rewards.shape
    if B == 0 or T == 0:
        raise ValueError(f"token_level_rewards: an empty batch {(B, T)} has nothing to give credit to")
    values = mask if mask.dtype == rewards.dtype else mask.to(rewards.dtype)
    # One fused pass, r - r * mask: 0 on the mask, the reward off it, and NaN wherever a reward is
    # NaN or infinite, so "min and max are 0" proves both rules at once (0.07 ms on 1024 x 512,
    # where testing finiteness entry by entry alone costs 0.5 ms). Only a failure looks closer.
    low, high = torch.aminmax(torch.addcmul(rewards, rewards, values, value=-1))
    if not (float(low) == 0.0 and float(high) == 0.0):
        check_finite("token_level_rewards", rewards)
        raise ValueError("token_level_rewards: non-zero reward where response_mask is 0; labkit gives credit "
                         "only to response tokens, so put each reward on a masked-in position")
    return rewards, mask, values


def _trusted_rollouts(token_level_rewards: Any, response_mask: Any, index: Any,
                      share_mask: bool) -> Rollouts:
    """The Rollouts of verl's (rewards, mask, uids), checked only where verl does not guarantee
    it (module docstring); ``share_mask`` keeps verl's float mask as the Rollouts' 0/1 float mask
    instead of copying it (the wrappers, whose Rollouts never outlives the call)."""
    rewards, mask, values = _checked(token_level_rewards, response_mask)
    B, T = rewards.shape
    ro = _VerlRollouts.__new__(_VerlRollouts)
    bool_mask = mask if mask.dtype == torch.bool else mask.bool()
    # Token ids: the estimators never read them; one 0 seen through a (B, T) view costs no memory.
    ro.__dict__.update(
        tokens=torch.zeros((), dtype=torch.long).expand(B, T), mask=bool_mask, rewards=rewards,
        group_ids=torch.zeros(B, dtype=torch.long) if index is None else _group_ids(index, B),
        logprobs=None, entropies=None, states=None, anchor_keys=None, text=None, prompts=None,
        truth={}, info={}, _labels={})
    # mask_as's cache (see Rollouts.mask_as): the 0/1 mask in the rewards' dtype, made once
    if values is mask and not share_mask:
        values = mask.clone()
    ro.__dict__["_mask_as"] = {values.dtype: (bool_mask, bool_mask._version, values)}
    return ro


def _score_rollouts(scores: torch.Tensor, group_ids: torch.Tensor) -> Rollouts:
    """A batch of one generated position per response, holding the response's score: (B, 1).

    Its scores and groups are those of verl's batch bit for bit (a sum of one number is that
    number), so an estimator whose credit depends on nothing else (``_SCORE_ONLY``) gives the
    same episode values on it as on the full batch, without painting them on (B, T) positions
    that the bridge paints again in verl's shape.
    """
    B = scores.shape[0]
    ro = _VerlRollouts.__new__(_VerlRollouts)
    ro.__dict__.update(
        tokens=torch.zeros((), dtype=torch.long).expand(B, 1), mask=torch.ones(B, 1, dtype=torch.bool),
        rewards=scores[:, None], group_ids=group_ids, logprobs=None, entropies=None, states=None,
        anchor_keys=None, text=None, prompts=None, truth={}, info={}, _labels={}, _mask_as={})
    return ro


# Episode-level estimators whose credit is a function of the scores and the groups alone (they
# never read the mask, lengths or token positions): the bridge runs them on ``_score_rollouts``.
# tests/bridges/test_bridges_verl.py checks each against a run on the full, validated batch.
_SCORE_ONLY = frozenset({"grpo", "dr_grpo", "rloo", "gpg", "grpo_passk"})


def _by_score(name: str, token_level_rewards: Any, response_mask: Any, index: Any,
              **options: Any) -> torch.Tensor:
    """The advantages (bs, response_length) of the score-only estimator ``name`` on verl's batch:
    its episode values (B, 1) times verl's mask (any non-zero entry counts, as given), in one
    multiplication, on the rewards' device and in their dtype. Off the mask a negative value gives
    -0.0, as verl's own estimators do."""
    rewards, _, values = _checked(token_level_rewards, response_mask)
    group_ids = _group_ids(_require(index), rewards.shape[0])
    credit = get_estimator(name)(_score_rollouts(rewards.sum(1), group_ids), **options)
    return _out(torch.mul(credit.values, values), token_level_rewards)


def rollouts_from_verl(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                       index: Any = None) -> Rollouts:
    """The labkit ``Rollouts`` that verl's (rewards, response mask, uids) describe, on the CPU.

    Token ids are not needed by these estimators and are all 0; ``index=None`` puts the whole
    batch in one group. Rewards must be finite, and 0 where the mask is 0 (verl puts the outcome
    on the last response token). Built without re-validating what verl guarantees (module
    docstring); its step / turn / agent labels are built on first read.
    """
    return _trusted_rollouts(token_level_rewards, response_mask, index, share_mask=False)


def _out(token: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return token.to(device=like.device, dtype=like.dtype)


def labkit_grpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True, config: Any = None,
                **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``grpo`` with verl's GRPO signature: (advantages, returns), both the advantage.

    ``config.norm_adv_by_std_in_grpo`` (when a config is given) wins over the keyword, as in verl's
    trainer; False gives Dr. GRPO.
    """
    norm = bool(_option(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    adv = _by_score("grpo", token_level_rewards, response_mask, index, eps=epsilon, normalize_std=norm)
    return adv, adv


def labkit_dr_grpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                   config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``dr_grpo`` (score minus group mean) with verl's signature: (advantages, advantages)."""
    adv = _by_score("dr_grpo", token_level_rewards, response_mask, index)
    return adv, adv


def labkit_rloo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``rloo`` (leave-one-out baseline; a group of one gets 0) with verl's signature."""
    adv = _by_score("rloo", token_level_rewards, response_mask, index)
    return adv, adv


def labkit_reinforce_pp(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                        config: Any = None, group_baseline: bool = False,
                        **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``reinforce_pp`` with verl's signature: (whitened advantages, discounted returns).

    ``config.gamma`` is the discount (1 without a config); ``group_baseline=True`` is the
    REINFORCE++-baseline variant (needs ``index``). Returns are what verl returns: the
    discounted reward-to-go before whitening (with ``group_baseline``, the advantage again).
    """
    gamma = float(_option(config, "gamma", 1.0))
    ro = _trusted_rollouts(token_level_rewards, response_mask, _require(index) if group_baseline else index,
                           share_mask=True)
    adv = _out(reinforce_pp(ro, gamma=gamma, group_baseline=group_baseline).token, token_level_rewards)
    if group_baseline:  # verl's REINFORCE++-baseline returns the whitened advantage twice
        return adv, adv
    return adv, _out(ro.returns(gamma), token_level_rewards)


def labkit_gae(token_level_rewards: torch.Tensor, values: torch.Tensor | None = None,
               response_mask: torch.Tensor | None = None, gamma: float | None = None, lam: float | None = None,
               config: Any = None, whiten_advantages: bool = True,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``gae`` with verl's GAE signature: (advantages, returns = A + V before whitening).

    ``gamma`` / ``lam`` default to the config's (1 without one). ``whiten_advantages`` is True
    here, unlike labkit's ``gae``: verl's PPO expects whitened advantages (labkit whitens with the
    population variance, verl with the unbiased one; see ``labkit.credit.td.gae``).
    """
    if values is None:
        raise ValueError("values: labkit_gae needs the critic's values (bs, response_length); verl 0.9.1 "
                         "passes them only to its own 'gae', so call labkit_gae from a trainer that does")
    if response_mask is None:
        raise ValueError("response_mask: required (bs, response_length)")
    gamma = float(_option(config, "gamma", 1.0) if gamma is None else gamma)
    lam = float(_option(config, "lam", 1.0) if lam is None else lam)
    ro = _trusted_rollouts(token_level_rewards, response_mask, None, share_mask=True)
    v = as_tensor("values", values).detach().cpu()
    credit = gae(ro, values=v, gamma=gamma, lam=lam, whiten_advantages=whiten_advantages)
    return _out(credit.token, token_level_rewards), _out(credit.info["returns"], token_level_rewards)


def _require(index: Any) -> Any:
    if index is None:
        _group_ids(None, 0)  # raises the message about verl's uid array
    return index


# labkit name -> the verl-signature wrapper; each is registered as "labkit_<name>"
def _episode_wrapper(name: str, doc: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A verl-signature wrapper of a labkit estimator that reads only rewards, mask and groups."""
    def wrapper(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        options = {}
        if name == "grpo_passk":
            options["normalize_std"] = bool(_option(config, "norm_adv_by_std_in_grpo", True))
        if name in _SCORE_ONLY:
            adv = _by_score(name, token_level_rewards, response_mask, index, **options)
        else:
            ro = _trusted_rollouts(token_level_rewards, response_mask, _require(index), share_mask=True)
            adv = _out(get_estimator(name)(ro, **options).token, token_level_rewards)
        return adv, adv

    wrapper.__name__ = wrapper.__qualname__ = f"labkit_{name}"
    wrapper.__doc__ = doc
    return wrapper


labkit_opo = _episode_wrapper("opo", "labkit's ``opo`` (length-weighted group baseline) with verl's signature.")
labkit_grpo_passk = _episode_wrapper(
    "grpo_passk", "labkit's ``grpo_passk`` (the group's best answer gets its margin) with verl's signature; "
                  "``config.norm_adv_by_std_in_grpo`` as in verl; a group of one gets 0 where verl raises.")
labkit_gpg = _episode_wrapper("gpg", "labkit's ``gpg`` (group mean, scaled by the share of rewards) with verl's signature.")
labkit_reinforce_pp_baseline = _episode_wrapper(
    "reinforce_pp_baseline", "labkit's ``reinforce_pp_baseline`` with verl's signature (advantages twice).")

def _verl_only(option: str, what: str, verl_name: str) -> ValueError:
    return ValueError(f"{option}: {what}; verl 0.9.1's trainer passes it only to its own '{verl_name}', so call "
                      f"this wrapper from a trainer that does")


def labkit_gdpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True, config: Any = None,
                non_tensor_batch: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """labkit's ``gdpo`` with verl's signature: each key of ``config.gdpo_reward_keys`` is one
    reward function's (bs,) scores in ``non_tensor_batch``, weighted by ``config.gdpo_reward_weights``
    (1 each by default). Without the keys verl falls back to the summed reward as the only
    function (GRPO, whitened); labkit refuses, naming what is missing."""
    keys = _option(config, "gdpo_reward_keys", None)
    if not keys:
        raise ValueError("config: GDPO needs algorithm.gdpo_reward_keys, the reward functions' keys in the batch")
    if non_tensor_batch is None:
        raise _verl_only("non_tensor_batch", "GDPO reads each reward function's scores from it", "gdpo")
    missing = [k for k in keys if k not in non_tensor_batch]
    if missing:
        raise ValueError(f"non_tensor_batch: no reward key {missing[0]!r}; it has {sorted(non_tensor_batch)}")
    parts = torch.stack([as_tensor(k, np.asarray(non_tensor_batch[k], dtype=np.float64)) for k in keys], 1)
    weights = _option(config, "gdpo_reward_weights", None)
    ro = _trusted_rollouts(token_level_rewards, response_mask, _require(index), share_mask=True)
    credit = get_estimator("gdpo")(ro, reward_parts=parts, weights=None if weights is None else list(weights),
                                   eps=epsilon, normalize_std=bool(norm_adv_by_std_in_grpo))
    adv = _out(credit.token, token_level_rewards)
    return adv, adv


def _token_baseline_wrapper(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A verl-signature wrapper of an optimal token baseline (it needs the sampling policy's
    log-probabilities and sum of squared probabilities, as verl's trainer hands its own)."""
    def wrapper(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                old_log_probs: Any = None, sum_pi_squared: Any = None, rollout_is_weights: Any = None,
                handle_zero_tail: bool = True, epsilon: float = 1e-8, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        for option, value in (("old_log_probs", old_log_probs), ("sum_pi_squared", sum_pi_squared)):
            if value is None:
                raise _verl_only(option, "the optimal token baseline needs it (bs, response_length)", name)
        ro = _trusted_rollouts(token_level_rewards, response_mask, _require(index), share_mask=True)
        logp = as_tensor("old_log_probs", old_log_probs).detach().cpu()
        check_shape("old_log_probs", logp, tuple(ro.mask.shape))
        # set on the trusted batch as verl's tensor: the estimator checks it (finite, <= 0 on the mask)
        ro.__dict__["logprobs"] = logp
        rho = None if rollout_is_weights is None else as_tensor("rollout_is_weights", rollout_is_weights).detach().cpu()
        credit = get_estimator(name)(ro, sum_pi_squared=as_tensor("sum_pi_squared", sum_pi_squared).detach().cpu(),
                                     rollout_is_weights=rho, handle_zero_tail=bool(handle_zero_tail), eps=epsilon)
        return _out(credit.token, token_level_rewards), _out(credit.info["returns"], token_level_rewards)

    wrapper.__name__ = wrapper.__qualname__ = f"labkit_{name}"
    wrapper.__doc__ = (f"labkit's ``{name}`` with verl's signature: (advantages, returns); ``old_log_probs`` and "
                       f"``sum_pi_squared`` (bs, response_length) as verl's trainer hands them to its own '{name}'.")
    return wrapper


labkit_optimal_token_baseline = _token_baseline_wrapper("optimal_token_baseline")
labkit_tir_optimal_token_baseline = _token_baseline_wrapper("tir_optimal_token_baseline")

BRIDGED: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    "grpo": labkit_grpo, "dr_grpo": labkit_dr_grpo, "rloo": labkit_rloo,
    "reinforce_pp": labkit_reinforce_pp, "gae": labkit_gae, "opo": labkit_opo, "grpo_passk": labkit_grpo_passk,
    "gpg": labkit_gpg, "reinforce_pp_baseline": labkit_reinforce_pp_baseline, "gdpo": labkit_gdpo, "optimal_token_baseline": labkit_optimal_token_baseline,
    "tir_optimal_token_baseline": labkit_tir_optimal_token_baseline,
}


def register(names: Any = None) -> list[str]:
    """Register the wrappers named in ``names`` (default: all of ``BRIDGED``) with verl's
    ``register_adv_est`` as ``labkit_<name>``; returns the registered names. Registering twice is
    harmless. Raises ImportError (naming the ``verl`` extra) where verl is not installed."""
    if names is None:
        names = list(BRIDGED)
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names: expected a list of labkit estimator names from {sorted(BRIDGED)}, got {names!r}")
    unknown = [n for n in names if n not in BRIDGED]
    if unknown:
        raise ValueError(f"names: {unknown} cannot be bridged to verl; bridged: {sorted(BRIDGED)} "
                         "(gigpo is not: verl's batch carries no anchor-state keys)")
    try:
        from verl.trainer.ppo.core_algos import register_adv_est
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err
    done = []
    for name in names:
        register_adv_est(f"labkit_{name}")(BRIDGED[name])
        done.append(f"labkit_{name}")
    return done
