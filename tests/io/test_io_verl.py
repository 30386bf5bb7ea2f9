"""verl batches (labkit.io.verl) read as Rollouts; a bad batch is refused with its row and key."""
from __future__ import annotations

import pickle

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from labkit.diagnose import diagnose
from labkit.io import RecordError, read_rollouts, to_verl_batch


# --------------------------------------------------------------------------- verl batches
def verl_batch(B=4, T=5):
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 3:] = 0          # a shorter response
    mask[2, 1:3] = 0         # tool output inside a multi-turn response
    scores = torch.zeros(B, T)
    scores[0, 4], scores[1, 2], scores[3, 4] = 1.0, 1.0, 0.5
    return {"responses": torch.randint(0, 50, (B, T), generator=g), "response_mask": mask,
            "token_level_scores": scores, "token_level_rewards": scores - 0.01 * mask,
            "old_log_probs": -torch.rand(B, T, generator=g), "entropys": torch.rand(B, T, generator=g),
            "attention_mask": torch.ones(B, 3 + T, dtype=torch.long), "prompts": torch.zeros(B, 3, dtype=torch.long),
            "uid": np.array(["9f1c", "9f1c", "07ab", "07ab"], dtype=object)}


def test_a_verl_batch_reads_as_rollouts():
    d = verl_batch()
    ro = read_rollouts(d, "verl")
    assert ro.mask.tolist() == d["response_mask"].bool().tolist()
    assert torch.equal(ro.rewards, d["token_level_scores"]) and ro.info["reward_key"] == "token_level_scores"
    assert ro.group_ids.tolist() == [0, 0, 1, 1] and ro.info["group_names"] == ("9f1c", "07ab")
    assert torch.equal(ro.logprobs, d["old_log_probs"]) and torch.equal(ro.entropies, d["entropys"])
    assert ro.info["ignored_fields"] == ("attention_mask", "prompts")
    # a DataProto: tensors in .batch, numpy arrays in .non_tensor_batch; fmt inferred
    proto = SimpleNamespace(batch={k: v for k, v in d.items() if k != "uid"}, non_tensor_batch={"uid": d["uid"]})
    assert torch.equal(read_rollouts(proto).rewards, ro.rewards)
    # without scores, token_level_rewards; without response_mask, the attention mask's response part
    d2 = {k: v for k, v in d.items() if k not in ("token_level_scores", "response_mask")}
    d2["attention_mask"] = torch.cat([torch.ones(4, 3, dtype=torch.long), d["response_mask"]], 1)
    ro2 = read_rollouts(d2, "verl")
    assert ro2.info["reward_key"] == "token_level_rewards" and torch.equal(ro2.mask, ro.mask)


def test_bad_verl_batches_name_row_and_key():
    d = verl_batch()
    d["token_level_scores"][2, 1] = 1.0  # on tool output
    with pytest.raises(RecordError, match=r"^source: row 2, field 'token_level_scores': position 1 carries") as info:
        read_rollouts(d, "verl")
    assert (info.value.record, info.value.field) == (2, "token_level_scores")
    d = verl_batch()
    d["old_log_probs"][3, 2] = 0.7
    with pytest.raises(RecordError, match=r"^source: row 3, field 'old_log_probs': .*at position 2"):
        read_rollouts(d, "verl")
    d = verl_batch()
    d["uid"] = d["uid"][:3]
    with pytest.raises(RecordError, match=r"^source: field 'uid': expected one id per row"):
        read_rollouts(d, "verl")
    with pytest.raises(RecordError, match=r"^source: field 'uid': missing"):
        read_rollouts({k: v for k, v in verl_batch().items() if k != "uid"}, "verl")


def test_a_saved_batch_is_a_pickle_read_only_when_trusted(tmp_path, toolworld):
    path = tmp_path / "batch.pkl"
    with open(path, "wb") as f:
        pickle.dump(to_verl_batch(toolworld), f)
    with pytest.raises(ValueError, match=r"^source: batch.pkl is read as a saved verl DataProto, which is a pickle"):
        read_rollouts(path)
    with pytest.raises(ValueError, match=r"trust_pickle"):
        diagnose(path, estimators=[], progress=False)
    ro = read_rollouts(path, trust_pickle=True)
    assert torch.equal(ro.tokens, toolworld.tokens) and ro.info["grouping"] == "uid"
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match=r"^source: junk.pkl is not a readable pickle"):
        read_rollouts(tmp_path / "junk.pkl", trust_pickle=True)


def test_the_batchs_advantages_are_kept(toolworld):
    batch = to_verl_batch(toolworld)
    batch["advantages"] = torch.randn(toolworld.tokens.shape)
    ro = read_rollouts(batch)
    assert torch.equal(ro.info["advantages"], batch["advantages"].double())
    assert torch.equal(ro.select([1, 0]).info["advantages"], batch["advantages"].double()[[1, 0]])
