"""verl's batch shape: padded response tensors, a response mask, token-level rewards, uids.

A verl ``DataProto`` keeps tensors in ``.batch`` (a TensorDict) and numpy arrays such as ``uid``
in ``.non_tensor_batch``; a plain dict of the same keys works too. Rows are numbered **from 0**.
Positions are the response window's T columns: ``response_mask`` 1 where the policy generated
(0 on tool output inside a multi-turn response and on padding).

Kept beside the fields: ``advantages`` (B, T), when the batch has them (after verl's
``compute_advantage``), in ``info['advantages']``. verl drops ``entropys`` from the batch right
after computing the entropy metrics, before the point where a user usually hooks in; to run the
entropy-based estimators, copy ``entropys`` into the batch yourself where it is computed.

A ``DataProto`` saved with ``save_to_disk`` is a **pickle**: loading it runs whatever code the
file names, so :func:`read_saved_verl` refuses it unless the caller says ``trust_pickle=True``
(``--trust-pickle``) for a file they made themselves; unpickling it needs verl installed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.io.assemble import Padded, assemble
from labkit.io.errors import record_error
from labkit.io.text_positions import position_texts

__all__ = ["read_verl", "read_saved_verl", "to_verl_batch", "REWARD_KEYS", "EXTRAS", "PICKLE_SUFFIXES"]

#: File names taken for a saved DataProto (a pickle) when no format is given.
PICKLE_SUFFIXES = (".pkl", ".pickle", ".dataproto")

#: The per-token reward tensors, in the order they are looked for: verl's reward function output
#: (``token_level_scores``) before the KL-penalised ``token_level_rewards``.
REWARD_KEYS = ("token_level_scores", "token_level_rewards")
#: labkit fields carried beside verl's own keys (verl passes unknown keys through untouched).
EXTRAS = ("step_ids", "turn_ids", "agent_ids", "states", "anchor_keys", "text", "prompt_text")
_KNOWN = {"responses", "response_mask", "uid", "old_log_probs", "entropys", "advantages", *REWARD_KEYS, *EXTRAS}


def _mapping(batch: Any) -> dict:
    if hasattr(batch, "batch") and hasattr(batch, "non_tensor_batch"):  # verl's DataProto
        out = {} if batch.batch is None else {k: batch.batch[k] for k in batch.batch.keys()}
        out.update(dict(batch.non_tensor_batch or {}))
        return out
    if hasattr(batch, "keys") and hasattr(batch, "__getitem__"):
        return {k: batch[k] for k in batch.keys()}
    raise TypeError(f"source: expected a verl batch (a dict, TensorDict or DataProto of tensors), "
                    f"got {type(batch).__name__}")


def _array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        return value.numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"source: field {name!r} cannot be read as an array ({err})") from None


def read_verl(batch: Any) -> Rollouts:
    """A verl batch -> validated Rollouts (RecordError naming the row and the verl key)."""
    d = _mapping(batch)

    def fail(row, name, detail):
        return record_error("source", "row", row, name, detail)

    if "responses" not in d:
        raise fail(None, "responses", "missing (the response token ids, shape (B, T))")
    tokens = _array("responses", d["responses"])
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        raise fail(None, "responses", f"expected integer token ids of shape (B, T), got {tokens.dtype} {tokens.shape}")
    B, T = tokens.shape
    if B == 0:
        raise fail(None, "responses", "no rows (empty batch)")

    def tensor(name: str, kind: str) -> np.ndarray:
        x = _array(name, d[name])
        if x.shape != (B, T):
            raise fail(None, name, f"expected shape {(B, T)} like 'responses', got {x.shape}")
        if kind == "int" and x.dtype.kind not in "iub":
            raise fail(0, name, f"expected integers, got dtype {x.dtype}")
        if kind == "float" and x.dtype.kind not in "fiu":
            raise fail(0, name, f"expected numbers, got dtype {x.dtype}")
        if kind == "float" and x.dtype.kind == "f":
            bad = ~np.isfinite(x)
            if bad.any():
                b, t = divmod(int(bad.argmax()), T)
                raise fail(b, name, f"must be finite, got {x[b, t]} at position {t}")
        return x

    if "response_mask" in d:
        mask = tensor("response_mask", "float")
    elif "attention_mask" in d:  # older verl: the response part of the attention mask
        att = _array("attention_mask", d["attention_mask"])
        if att.ndim != 2 or att.shape[0] != B or att.shape[1] < T:
            raise fail(None, "attention_mask", f"expected shape ({B}, >= {T}), got {att.shape}")
        mask = att[:, -T:]
    else:
        raise fail(None, "response_mask", "missing (1 where the policy generated, shape (B, T))")
    bad = (mask != 0) & (mask != 1)
    if bad.any():
        b, t = divmod(int(bad.argmax()), T)
        raise fail(b, "response_mask", f"expected 0/1, got {mask[b, t]} at position {t}")
    key = next((k for k in REWARD_KEYS if k in d), None)
    if key is None:
        raise fail(None, REWARD_KEYS[0], f"missing (per-token rewards, shape (B, T); or {REWARD_KEYS[1]!r})")
    scores = tensor(key, "float")
    if "uid" not in d:
        raise fail(None, "uid", "missing (one prompt id per row: verl's non_tensor_batch['uid'])")
    uid = _array("uid", d["uid"])
    if uid.shape != (B,):
        raise fail(None, "uid", f"expected one id per row, shape ({B},), got {uid.shape}")
    if uid.dtype.kind == "f":
        raise fail(0, "uid", f"expected integer or string ids, got dtype {uid.dtype}")

    names = {"tokens": "responses", "mask": "response_mask", "rewards": key, "group_ids": "uid",
             "logprobs": "old_log_probs", "entropies": "entropys", "prompts": "prompt_text",
             **{n: n for n in ("step_ids", "turn_ids", "agent_ids", "states", "anchor_keys", "text")}}
    everything = np.ones((B, T), dtype=bool)
    all_rows = np.ones(B, dtype=bool)
    ignored = sorted(str(k) for k in d if k not in _KNOWN)
    info = {"source": "verl batch", "format": "verl", "reward_key": key, "grouping": "uid",
            "position_unit": "token"}
    if "advantages" in d:
        info["advantages"] = torch.from_numpy(np.array(tensor("advantages", "float"), dtype=np.float64))
    if ignored:
        info["ignored_fields"] = tuple(ignored)
    p = Padded(argument="source", unit="row", numbers=np.arange(B), names=names, tokens=tokens.astype(np.int64),
               valid=everything, group=uid, generated=(mask.astype(bool), all_rows),
               rewards=(scores.astype(np.float64), all_rows),
               reward_dtype=np.float32 if scores.dtype == np.float32 else np.float64, info=info)
    for verl_name, field in (("old_log_probs", "logprobs"), ("entropys", "entropies")):
        if verl_name in d:
            x = tensor(verl_name, "float")
            setattr(p, field, x if x.dtype.kind == "f" else x.astype(np.float64))
    for name in ("step_ids", "turn_ids", "agent_ids"):
        if name in d:
            p.labels[name] = (tensor(name, "int").astype(np.int64), all_rows)
    if "states" in d:
        p.states = tensor("states", "int").astype(np.int64)
    for name, attr in (("anchor_keys", "anchor_keys"), ("text", "text"), ("prompt_text", "prompts")):
        if name in d:
            value = list(d[name])
            if len(value) != B:
                raise fail(None, name, f"expected one entry per row ({B}), got {len(value)}")
            setattr(p, attr, [list(v) if attr != "prompts" else v for v in value])
    return assemble(p)


def read_saved_verl(path, *, trust_pickle: bool = False) -> Rollouts:
    """A ``DataProto`` saved with ``save_to_disk`` -> validated Rollouts; only with
    ``trust_pickle=True`` (see the module docstring)."""
    import pickle
    from pathlib import Path

    path = Path(path)
    if not trust_pickle:
        raise ValueError(f"source: {path.name} is read as a saved verl DataProto, which is a pickle: loading it runs "
                         f"code named in the file. Only for a file you made yourself: pass trust_pickle=True "
                         f"(--trust-pickle). Or write the batch with labkit.io.write_rollouts(read_rollouts(batch), "
                         f"'rollouts.parquet') where you have it in memory")
    with open(path, "rb") as f:
        try:
            batch = pickle.load(f)
        except ModuleNotFoundError as err:
            raise ImportError(f"source: {path.name} is a pickled {err.name!r} object; reading it needs that package "
                              f"(verl) installed") from None
        except (pickle.UnpicklingError, EOFError) as err:
            raise ValueError(f"source: {path.name} is not a readable pickle ({err})") from None
    out = read_verl(batch)
    out.info["source"] = str(path)
    return out


def to_verl_batch(rollouts: Rollouts) -> dict:
    """The batch in verl's shape: a dict of ``responses`` (B, T) long, ``response_mask`` (B, T)
    int64 0/1, ``token_level_scores`` and ``token_level_rewards`` (B, T) (both the rewards: there
    is no KL penalty here), ``uid`` (numpy object array: the group ids, or the source's ids kept
    in ``info['group_names']``), ``old_log_probs`` / ``entropys`` when present, and labkit's own
    fields under their names (``step_ids``, ``turn_ids``, ``agent_ids``, ``states``,
    ``anchor_keys``, ``text``, and ``prompt_text``, since verl's ``prompts`` holds prompt token
    ids), which verl carries along untouched. ``read_rollouts(batch, "verl")`` gives the
    Rollouts back (``truth`` and ``info`` aside). Tensors are copies."""
    ro = check_rollouts(rollouts)
    groups = ro.group_ids.tolist()
    names = ro.info.get("group_names")
    if isinstance(names, tuple) and len(names) > max(groups):
        groups = [names[g] for g in groups]
    uid = np.empty(len(groups), dtype=object)
    uid[:] = groups
    out = {"responses": ro.tokens.clone(), "response_mask": ro.mask.to(torch.int64),
           "token_level_scores": ro.rewards.clone(), "token_level_rewards": ro.rewards.clone(), "uid": uid,
           "step_ids": ro.step_ids.clone(), "turn_ids": ro.turn_ids.clone(), "agent_ids": ro.agent_ids.clone()}
    if ro.logprobs is not None:
        out["old_log_probs"] = ro.logprobs.clone()
    if ro.entropies is not None:
        out["entropys"] = ro.entropies.clone()
    if ro.states is not None:
        out["states"] = ro.states.clone()
    if ro.anchor_keys is not None:
        out["anchor_keys"] = [list(k) for k in ro.anchor_keys]
    text = position_texts(ro)
    if text is not None:
        out["text"] = [list(t) for t in text]
    if ro.prompts is not None:
        out["prompt_text"] = list(ro.prompts)
    return out
