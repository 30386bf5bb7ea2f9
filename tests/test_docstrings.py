"""Every registered estimator documents itself in one layout (see labkit/credit/episode.py):

    <Method name> (<authors/year>, arXiv <id>): <what the credit is>.

    Formula: / Defaults: / Degenerate input: / Deviations from the reference: / Cost:

each section header exactly once, on a line of its own, in that order.
"""
from __future__ import annotations

import inspect
import re

import pytest

from labkit.credit import ESTIMATORS

SECTIONS = ("Formula:", "Defaults:", "Degenerate input:", "Deviations from the reference:", "Cost:")
CITATION = re.compile(r"arXiv[: ]?\d{4}\.\d{4,5}|\b(19|20)\d{2}\b")


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
    assert "Formula:" not in first, f"{name}: the first paragraph must come before the sections"
    assert CITATION.search(first), f"{name}: no arXiv id or cited year in the first paragraph: {first!r}"
