"""The notebooks' checked outputs: every banded check has a stored value and a measured band, and no
text-pinned cell prints float noise.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest


ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# --------------------------------------------------------------------------- the course's own checks
def _cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def _keys_used(path):
    keys = set()
    for cell in _cells(path):
        keys |= set(re.findall(r'check\.expect\(f?"([^"]+)"', cell.source))
    return keys


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_banded_check_has_stored_values_and_a_measured_band(path):
    used = _keys_used(path)
    stored_path = ROOT / "data" / "notebook_checks" / f"{path.stem}.json"
    if not used:
        assert not stored_path.exists(), f"{stored_path.name} has checks no cell makes"
        return
    stored = json.loads(stored_path.read_text())
    fixed = {k for k in used if "{" not in k}
    assert fixed <= set(stored), f"cells check keys with no stored values: {sorted(fixed - set(stored))}"
    for key, entry in stored.items():
        assert entry["values"], key
        assert entry["band"] is not None and entry["spread"] is not None, f"{key}: band and measured spread"
        assert entry["note"], f"{key}: say how the band was chosen"
        band, spread = entry["band"], entry["spread"]
        pairs = ([(band[c], spread[c]) for c in band] if isinstance(band, dict) else [(band, spread)])
        for b, s in pairs:
            assert b >= s, f"{key}: band {b} is narrower than the spread {s} measured across the matrix"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_text_pinned_cells_hold_no_float_noise(path):
    for cell in _cells(path):
        if "NBVAL_CHECK_OUTPUT" not in cell.source:
            continue
        assert "check.expect" not in cell.source, "a cell is either pinned as text or banded, not both"
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert not re.search(r"(?<![\d.])-0\.0+(?![\d])", text), f"negative zero in a pinned cell:\n{cell.source}"
        assert not re.search(r"\d\.\de-1\d", text), f"rounding noise (1e-1x) printed in a pinned cell:\n{cell.source}"
