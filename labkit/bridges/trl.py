"""labkit's estimators inside TRL's ``GRPOTrainer`` (TRL: von Werra et al., https://github.com/huggingface/trl).

TRL's ``GRPOTrainer`` scores a batch of completions and gives each one scalar advantage (its
group-normalised reward); its loss also takes advantages of shape (B, T), one per completion
token, from a subclass. :func:`labkit_grpo_trainer` builds such a subclass: after TRL has
generated and scored the completions it builds a labkit :class:`~labkit.core.rollouts.Rollouts`
from the batch and replaces TRL's advantages with the per-token credit of a registered labkit
estimator::

    from labkit.bridges.trl import labkit_grpo_trainer
    trainer = labkit_grpo_trainer(estimator="tempo", model=..., reward_funcs=..., args=GRPOConfig(...), ...)
    trainer.train()

What the ``Rollouts`` holds: ``tokens`` the completion ids, ``mask`` TRL's completion mask,
``rewards`` the weighted sum of the reward functions (TRL's ``reward_weights``, its default
``sum_then_normalize`` aggregation) on the last completion token, ``group_ids`` TRL's groups
(``num_generations`` consecutive completions per prompt). Estimators that need nothing else run
as they are (``grpo``, ``dr_grpo``, ``rloo``, ``reinforce``, ``reinforce_baseline``,
``reinforce_pp``, ``tempo``); ``gdpo`` gets each reward function's column of TRL's
``rewards_per_func`` as its ``reward_parts`` and TRL's ``reward_weights`` as its weights; an
estimator's other inputs (a critic's values, ...) can be given in ``estimator_kwargs`` (a tensor
over the batch, or where the estimator accepts one, a callable ``rollouts -> tensor``). Estimators that need a per-position field TRL's batch does not carry
(anchor keys, entropies, log-probabilities, states) are refused by name.

The advantages are 0 off the completion mask, and 0 for a completion every reward function
returned None for (as TRL does; labkit counts such a completion's reward as 0 in its group's
statistics, where TRL leaves it out). A completion whose mask is all 0 (TRL's
``mask_truncated_completions``) keeps its reward in its group's statistics: labkit sees it as one
token at position 0 and its advantages are then zeroed by the mask. TRL's completions table and
``_logs["advantages"]`` show each completion's mean labkit advantage over its tokens.

Limits: one training process only (the trainer raises at its first batch under several; TRL
gathers the rewards of every process but each process holds only its own completions, which a
token-level estimator needs whole); the scalar features TRL applies to its own advantages
(``scale_rewards``, ``multi_objective_aggregation="normalize_then_sum"``) are not applied: the
estimator and its options decide the normalisation.

TRL is an optional extra: this module imports without it and imports TRL only inside
:func:`trainer_class` (``scripts/run_trl.py`` builds the tested environment, ``.venv-trl``).
"""
from __future__ import annotations

from typing import Any

import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, get_estimator, spec
from labkit.credit.registry import FIELD_FEATURES

__all__ = ["rollouts_from_trl", "trainer_class", "labkit_grpo_trainer", "check_bridgeable"]

INSTALL_HINT = ("labkit.bridges.trl needs TRL (an optional extra): pip install trl, "
                "or `python scripts/run_trl.py` for the tested environment (requirements-trl.txt)")

_CLASS: dict[str, type] = {}


def check_bridgeable(estimator: str) -> str:
    """``estimator`` if it is a registered labkit estimator TRL's batch can feed; else a ValueError
    naming ``estimator`` (unknown, or it needs a per-position field the batch does not carry)."""
    if not isinstance(estimator, str):
        raise TypeError(f"estimator: expected a registered labkit estimator's name (a str), "
                        f"got {type(estimator).__name__}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator: no labkit estimator {estimator!r}; known: {sorted(ESTIMATORS)}")
    missing = [f for f in spec(estimator).needs if f in FIELD_FEATURES]
    if missing:
        raise ValueError(f"estimator: {estimator!r} needs {missing} per position, which TRL's GRPO batch "
                         "does not carry")
    return estimator


def rollouts_from_trl(completion_ids: torch.Tensor, completion_mask: torch.Tensor, rewards: torch.Tensor,
                      num_generations: int) -> Rollouts:
    """The labkit ``Rollouts`` of one TRL batch, on the CPU.

    ``completion_ids`` (B, T) and ``completion_mask`` (B, T) as TRL's batch holds them,
    ``rewards`` (B,) each completion's summed reward (NaN counts as 0), ``num_generations`` TRL's
    group size (B a multiple of it). The reward sits on the last masked-in token; a row with no
    masked-in token is given position 0 so that its reward still counts in its group.
    """
    ids = completion_ids.detach().cpu().long()
    if ids.dim() != 2:
        raise ValueError(f"completion_ids: expected (B, T), got {tuple(ids.shape)}")
    B, T = ids.shape
    mask = completion_mask.detach().cpu().bool()
    if tuple(mask.shape) != (B, T):
        raise ValueError(f"completion_mask: expected {(B, T)} like completion_ids, got {tuple(mask.shape)}")
    scores = torch.nan_to_num(rewards.detach().cpu().double().reshape(-1), nan=0.0)
    if scores.shape != (B,):
        raise ValueError(f"rewards: expected one per completion, ({B},), got {tuple(rewards.shape)}")
    if not isinstance(num_generations, int) or num_generations < 1 or B % num_generations:
        raise ValueError(f"num_generations: expected a positive int dividing the batch size {B}, "
                         f"got {num_generations!r}")
    empty = ~mask.any(dim=1)
    mask[empty, 0] = True
    last = T - 1 - mask.flip(1).int().argmax(dim=1)
    token_rewards = torch.zeros(B, T, dtype=torch.float64)
    token_rewards[torch.arange(B), last] = scores
    groups = torch.arange(B) // num_generations
    return Rollouts(tokens=ids.clamp(min=0), mask=mask, rewards=token_rewards, group_ids=groups)


def trainer_class() -> type:
    """``LabkitGRPOTrainer``: TRL's ``GRPOTrainer`` with labkit's per-token advantages, made on
    first use (it imports TRL). Built with ``LabkitGRPOTrainer(estimator="grpo",
    estimator_kwargs=None, **GRPOTrainer's keywords)``; raises ImportError naming TRL without it."""
    if "trainer" in _CLASS:
        return _CLASS["trainer"]
    try:
        from trl import GRPOTrainer
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err

    class LabkitGRPOTrainer(GRPOTrainer):
        """TRL's GRPOTrainer whose advantages are labkit's per-token credit (``labkit.bridges.trl``).

        ``estimator``: a registered labkit estimator; ``estimator_kwargs``: its options. After
        every scored batch, ``labkit_last`` holds the ``Rollouts``, the labkit advantages (B, T),
        TRL's own advantages (B,) it replaced (on the CPU) and the options the estimator got, for
        inspection.
        """

        def __init__(self, *args: Any, estimator: str = "grpo", estimator_kwargs: dict | None = None,
                     **kwargs: Any) -> None:
            self.labkit_estimator = check_bridgeable(estimator)
            if estimator_kwargs is not None and not isinstance(estimator_kwargs, dict):
                raise TypeError(f"estimator_kwargs: expected a dict of the estimator's options, "
                                f"got {type(estimator_kwargs).__name__}")
            self.labkit_estimator_kwargs = dict(estimator_kwargs or {})
            self.labkit_last: dict[str, Any] = {}
            self._labkit_rewards_per_func = None
            super().__init__(*args, **kwargs)

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._labkit_rewards_per_func = rewards_per_func  # gathered over processes: (all B, n_funcs)
            return rewards_per_func

        def _generate_and_score_completions(self, inputs):
            if self.accelerator.num_processes > 1:
                raise NotImplementedError(
                    "labkit.bridges.trl: LabkitGRPOTrainer runs in one process only; under several each process "
                    "holds only its own completions, which a token-level estimator needs whole")
            output = super()._generate_and_score_completions(inputs)
            per_func = self._labkit_rewards_per_func
            weights = self.reward_weights.to(per_func.device)
            unscorable = torch.isnan(per_func).all(dim=1)
            rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1)
            mode = "train" if self.model.training else "eval"
            groups = self.num_generations if mode == "train" else self.num_generations_eval
            mask = output["completion_mask"]
            if "tool_mask" in output:
                mask = mask * output["tool_mask"]
            ro = rollouts_from_trl(output["completion_ids"], mask, rewards, groups)
            options = dict(self.labkit_estimator_kwargs)
            if "reward_parts" in spec(self.labkit_estimator).inputs and "reward_parts" not in options:
                # GDPO: each reward function's own column (None counts as 0, as in the summed reward)
                options["reward_parts"] = torch.nan_to_num(per_func.detach().cpu().double(), nan=0.0)
                options.setdefault("weights", weights.detach().cpu().double())
            credit = get_estimator(self.labkit_estimator)(ro, **options)
            real = mask.detach().cpu().bool()
            adv = credit.token.detach().cpu().double() * real
            adv[unscorable.cpu()] = 0.0
            trl_adv = output["advantages"]
            self.labkit_last = {"rollouts": ro, "advantages": adv, "trl_advantages": trl_adv.detach().cpu(),
                                "mask": real, "credit": credit, "options": options}
            output["advantages"] = adv.to(device=trl_adv.device, dtype=trl_adv.dtype)
            # the completions table logs one advantage per completion: show labkit's mean over its tokens
            logged = self._logs["advantages"]
            n = adv.shape[0]
            if len(logged) >= n:
                per_row = (adv.sum(dim=1) / real.sum(dim=1).clamp(min=1)).tolist()
                for _ in range(n):
                    logged.pop()
                logged.extend(per_row)
            return output

    _CLASS["trainer"] = LabkitGRPOTrainer
    return LabkitGRPOTrainer


def labkit_grpo_trainer(estimator: str = "grpo", estimator_kwargs: dict | None = None, **grpo_trainer_kwargs: Any):
    """A ``LabkitGRPOTrainer`` (see :func:`trainer_class`): TRL's GRPOTrainer built from
    ``grpo_trainer_kwargs`` (model, reward_funcs, args, train_dataset, ...) whose advantages are
    the per-token credit of the labkit estimator ``estimator`` with options ``estimator_kwargs``."""
    check_bridgeable(estimator)
    return trainer_class()(estimator=estimator, estimator_kwargs=estimator_kwargs, **grpo_trainer_kwargs)


def __getattr__(name: str) -> Any:
    # ``from labkit.bridges.trl import LabkitGRPOTrainer`` builds the class (importing TRL) on first use
    if name == "LabkitGRPOTrainer":
        return trainer_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
