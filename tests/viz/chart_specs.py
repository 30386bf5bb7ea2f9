"""Readers of Vega-Lite specs (chart.to_dict()) that the viz tests share."""
from __future__ import annotations



# ----------------------------------------------------------------------------------------------
# helpers


def walk(node, path=()):
    """Yield (path, key, value) for every dict entry in a nested spec."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path, k, v
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


def records(spec: dict) -> list[dict]:
    """The rows of the single dataset a chart embeds."""
    datasets = spec["datasets"]
    assert len(datasets) == 1, list(datasets)
    return next(iter(datasets.values()))


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def color_scale(spec: dict) -> dict:
    scales = [l["encoding"]["color"]["scale"] for l in layers(spec) if "color" in l.get("encoding", {})]
    assert len(scales) == 1
    return scales[0]


def cell(recs, pos, row_label="row 0"):
    hits = [r for r in recs if r["pos"] == pos and r["row"] == row_label]
    assert len(hits) == 1, (pos, row_label, hits)
    return hits[0]
