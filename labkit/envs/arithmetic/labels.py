"""Token roles in the arithmetic task's completions: which characters plan and which execute.

HICRA (arXiv 2509.03646) separates *planning* tokens (high-level choices: what to do next) from
*procedural* tokens (carrying out a choice). In a completion such as ``23+48=71;71+19=90;#90``
the split is known by construction, character by character:

=============  ==========================================  =========  ====================
role           characters                                  planning?  why
=============  ==========================================  =========  ====================
``operand``    the digits of a and b in a step ``a+b=c``    yes        which numbers to add
                                                                       next is the plan
``answer_mark`` the ``#`` that starts the answer            yes        deciding to stop and
                                                                       answer
``operator``   ``+`` and ``=`` inside a step                no         fixed by the format
``result``     the digits of c                              no         the addition itself
``separator``  ``;``                                        no         format
``answer``     the digits after ``#``                       no         copying the total
``eos``        the end-of-sequence token                    no         format
``other``      anything else (malformed text)               no
=============  ==========================================  =========  ====================

``planning_mask`` turns these roles into the (B, T) bool mask ``labkit.credit.entropy.hicra``
takes; pass ``roles=`` to move the line (e.g. ``("operand",)`` or ``("operand", "operator")``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from labkit.core.rollouts import Rollouts
from labkit.policies.vocab import ANSWER_MARK, DIGITS, EOS, STEP_SEP

ROLES = ("operand", "operator", "result", "separator", "answer_mark", "answer", "eos", "other")
PLANNING_ROLES = ("operand", "answer_mark")


def _texts(rollouts: Rollouts, decode: Callable[[int], str] | None) -> list[list[str]]:
    if decode is not None:
        if not callable(decode):
            raise TypeError(f"decode: expected a callable token id -> string, got {type(decode).__name__}")
        return [[decode(int(tok)) if m else "" for tok, m in zip(row.tolist(), mrow.tolist())]
                for row, mrow in zip(rollouts.tokens, rollouts.mask)]
    if rollouts.text is None:
        raise ValueError("decode: the rollouts carry no text; pass decode (e.g. ArithmeticLM.token_text)")
    return rollouts.text


def token_roles(rollouts: Rollouts, *, decode: Callable[[int], str] | None = None) -> list[list[str]]:
    """The role (one of ``ROLES``) of every position, "" off the mask.

    Characters come from ``rollouts.text`` or, if given, ``decode(token_id)``. Within a
    ``;``-separated segment the roles follow a left-to-right reading: digits before ``+`` are
    operand a, digits between ``+`` and ``=`` operand b, digits after ``=`` the result; after a
    ``#`` digits are the answer. Malformed segments are read the same way, best effort.
    """
    out = []
    for row, mrow in zip(_texts(rollouts, decode), rollouts.mask.tolist()):
        roles, state = [], "lhs"
        for ch, m in zip(row, mrow):
            if not m:
                roles.append("")
                continue
            if ch == STEP_SEP:
                role, state = "separator", "lhs"
            elif ch == EOS:
                role = "eos"
            elif ch == ANSWER_MARK:
                role, state = "answer_mark", "answer"
            elif ch in ("+", "="):
                role = "operator"
                state = {"+": "rhs", "=": "result"}[ch] if state in ("lhs", "rhs") else "other"
            elif len(ch) == 1 and ch in DIGITS:
                role = {"lhs": "operand", "rhs": "operand", "result": "result", "answer": "answer"}.get(state, "other")
            else:
                role = "other"
            roles.append(role)
        out.append(roles)
    return out


def planning_mask(rollouts: Rollouts, *, roles: Sequence[str] = PLANNING_ROLES,
                  decode: Callable[[int], str] | None = None) -> torch.Tensor:
    """(B, T) bool: True at generated positions whose role is in ``roles`` (default: operands
    and the answer mark, see the module docstring)."""
    if isinstance(roles, str):
        roles = (roles,)
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise ValueError(f"roles: unknown role(s) {bad}; known: {ROLES}")
    chosen = set(roles)
    table = token_roles(rollouts, decode=decode)
    return torch.tensor([[r in chosen for r in row] for row in table], dtype=torch.bool).reshape(rollouts.mask.shape)
