"""Every registered estimator documents itself in one layout (see labkit/credit/episode.py):

    <Method name> (<authors/year>, arXiv <id>): <what the credit is>.

    Inputs: / Formula: / Defaults: / Degenerate input: / Deviations from the reference: /
    Returns: / Cost:

each section header exactly once, on a line of its own, in that order. ``Inputs:`` names the
rollout fields the estimator reads and every option of its spec's ``inputs`` with its kind;
``Formula:`` holds the formula (what the method card shows); ``Returns:`` the credit's level and
its ``info`` keys. The bad-input rule shared by every estimator (an error naming the argument) is
stated once, in labkit.credit.registry, not in each docstring.
"""
from __future__ import annotations

import inspect
import re

import pytest
import torch

from labkit.core.protocols import DOCSTRING_SECTIONS
from labkit.credit import ESTIMATORS, spec

import fuzz_cases as fc

SECTIONS = DOCSTRING_SECTIONS
CITATION = re.compile(r"arXiv[: ]?\d{4}\.\d{4,5}|\b(19|20)\d{2}\b")
SHARED_RULE = re.compile(r"\b(raises?|raising)\b[^.]*\b(ValueError|TypeError|error)|\bnaming\b")


def _section(name: str, header: str) -> str:
    lines = [line.strip() for line in inspect.getdoc(ESTIMATORS[name]).splitlines()]
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] in SECTIONS), len(lines))
    return "\n".join(lines[start:end])


def test_the_registry_is_populated():
    assert len(ESTIMATORS) >= 29


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimator_docstring_has_the_sections_in_order(name):
    doc = inspect.getdoc(ESTIMATORS[name])
    assert doc, f"{name}: no docstring"
    lines = [line.strip() for line in doc.splitlines()]
    positions = []
    for header in SECTIONS:
        assert doc.count(header) == 1, f"{name}: {header!r} occurs {doc.count(header)} times, expected once"
        assert lines.count(header) == 1, f"{name}: {header!r} is not a header on a line of its own"
        positions.append(lines.index(header))
    assert positions == sorted(positions), f"{name}: sections out of order {SECTIONS}"
    # every section has content before the next header (or the end)
    for here, nxt in zip(positions, positions[1:] + [len(lines)]):
        assert any(lines[here + 1:nxt]), f"{name}: section {lines[here]!r} is empty"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimator_docstring_cites_its_source_in_the_first_paragraph(name):
    doc = inspect.getdoc(ESTIMATORS[name])
    first = doc.split("\n\n")[0]
    assert "Formula:" not in first and "Inputs:" not in first, \
        f"{name}: the first paragraph must come before the sections"
    assert CITATION.search(first), f"{name}: no arXiv id or cited year in the first paragraph: {first!r}"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_inputs_section_names_every_input_of_the_spec_with_its_kind(name):
    inputs = _section(name, "Inputs:")
    assert "rollouts" in inputs, f"{name}: Inputs: says which rollout fields it reads"
    for option, kind in spec(name).inputs.items():
        assert f"``{option}``" in inputs and kind in inputs, f"{name}: Inputs: names ``{option}`` ({kind})"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_returns_section_gives_the_level_and_every_info_key(name):
    returns = _section(name, "Returns:")
    assert f'level "{spec(name).level}"' in returns, f"{name}: Returns: gives the credit's level"
    ro = fc.base_rollouts(name)
    torch.manual_seed(0)
    info = ESTIMATORS[name](ro, **fc.estimator_inputs(name, ro)).info
    missing = [k for k in info if f"``{k}``" not in returns]
    assert not missing, f"{name}: Returns: does not name the info keys {missing}"
    assert "``info``" not in _section(name, "Formula:"), f"{name}: info keys belong in Returns:, not Formula:"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_shared_bad_input_rule_is_not_repeated(name):
    doc = inspect.getdoc(ESTIMATORS[name])
    found = SHARED_RULE.search(doc)
    assert found is None, f"{name}: {found.group(0)!r}: the registry's docstring states the bad-input rule once"
