"""The reporting checklist (labkit.survey.checklist): data, and bad rows named."""
from __future__ import annotations

import pytest

from labkit.survey import REPORTING_CHECKLIST


def test_reporting_checklist():
    assert len(REPORTING_CHECKLIST) == 14
    assert len({item.key for item in REPORTING_CHECKLIST}) == 14
    assert {item.priority for item in REPORTING_CHECKLIST} == {"required", "recommended"}
    assert sum(item.priority == "required" for item in REPORTING_CHECKLIST) == 10
    assert len({item.category for item in REPORTING_CHECKLIST}) == 6
    assert all(item.item.endswith(".") for item in REPORTING_CHECKLIST)


def test_checklist_is_data_and_bad_rows_are_named(tmp_path):
    from labkit.survey.checklist import CHECKLIST_CSV, load_checklist
    assert load_checklist(CHECKLIST_CSV) == REPORTING_CHECKLIST
    bad = tmp_path / "checklist.csv"
    bad.write_text("key,category,priority,item\na,B,required,x\na,B,required,y\n")
    with pytest.raises(ValueError, match="row 3: duplicate key 'a'"):
        load_checklist(bad)
    bad.write_text("key,category,priority,item\na,B,sometimes,x\n")
    with pytest.raises(ValueError, match="row 2: priority"):
        load_checklist(bad)
    bad.write_text("key,category,item\na,B,x\n")
    with pytest.raises(ValueError, match="columns"):
        load_checklist(bad)
