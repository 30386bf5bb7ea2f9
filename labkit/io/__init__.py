"""labkit.io: trajectories in and out of the lab, through the one validated ``Rollouts`` boundary.

Read a training run's dump (the lab's JSON Lines or Parquet, the files TRL and verl write, a
verl batch or TRL rows in memory) with
:func:`read_rollouts` (whole, or only some records: ``rows=``), or a file too large to load in
chunks of ``batch_rows`` records with :func:`iter_rollouts` (group ids keep the file's identity
across chunks; errors keep the file's record numbers); write the lab's own rollouts with :func:`write_rollouts` (JSON Lines,
Parquet), :func:`to_verl_batch` or :func:`to_trl`. Every reader checks each record and then the
batch as a ``Rollouts``; a bad record raises :class:`RecordError` with the record's number
(1-based **line** for JSONL, 0-based **row** for Parquet, verl and TRL) and the field, and
nothing is returned half-read. This package imports ``labkit.core`` only.

The record format (one trajectory per record; JSON Schema: ``data/io/rollout_record.schema.json``,
:func:`load_schema`). A record's **positions** are its tokens in order: what the policy generated
and what tools returned. Per-position fields have one entry per position.

=================  ==========================  ====================================================
field              type                        maps to ``Rollouts``
=================  ==========================  ====================================================
``group_id``       int >= 0 or string          ``group_ids`` (required; same prompt / task = same
                                               id; non-integer ids are numbered by first
                                               appearance, originals in ``info['group_names']``)
``tokens``         list of int >= 0            ``tokens`` (required; may be empty)
``reward``         number                      the **outcome** reward (required), put on the last
                                               generated position of ``rewards``
``prompt``         string                      ``prompts`` (a record without one reads as ``""``)
``text``           list of string              ``text`` (display string of each position)
``generated``      list of 0/1 (or bool)       ``mask``: 1 = the policy produced the position,
                                               0 = tool output / environment (default: all 1)
``rewards``        list of number              intermediate rewards per position, **added** to the
                                               outcome (default 0); only on generated positions
``step_ids``       list of int                 ``step_ids``: 0, 1, 2, ... along generated
``turn_ids``       list of int                 ``turn_ids``  positions (no gaps, never down);
``agent_ids``      list of int                 ``agent_ids`` values on tool output are ignored
                                               (read as -1). Defaults: every generated position
                                               its own step; one turn; agent 0
``logprobs``       list of number              ``logprobs`` (<= 0 where generated)
``entropies``      list of number              ``entropies`` (>= 0 where generated)
``states``         list of int >= 0            ``states`` (a state index per position)
``anchor_keys``    list of string / int        ``anchor_keys``: one key per **step** (GiGPO)
=================  ==========================  ====================================================

Rules: ``null`` means absent. Fields with a default (``generated``, ``rewards``, the labels,
``prompt``) may be given in some records only; ``text``, ``logprobs``, ``entropies``, ``states``
and ``anchor_keys`` are in every record or in none. Per-position lists must have the length of
``tokens``; a reward (``rewards``, or a non-zero ``reward`` of a record with nothing generated)
may not sit on a position the policy did not generate. **Unknown fields are ignored** (a dump
often carries metadata such as a data source or a step count); their names are listed in
``info['ignored_fields']`` so a misspelt field does not pass unnoticed. Numbers: JSON numbers
are read as float64; Parquet and verl keep their column's float type. A batch is padded to its
longest record with token 0, not generated, reward 0, labels -1, log-prob / entropy 0, state 0,
text ``""``; the writers store each trajectory up to its last generated position (the rest is
padding), and neither ``truth`` nor ``info`` (``info['group_names']`` aside, which turns the
group ids back into the source's ids).

What the frameworks write, read as they write it (``read_rollouts(path)`` tells them apart):

* ``fmt="trl"`` (``labkit.io.trl``): TRL's completions files (``completions_NNNNN.parquet``, one
  or the folder: ``step``, ``prompt``, ``completion``, a column per reward function,
  ``advantage``), ``trainer._logs``, or rows in memory (a dict of columns, a DataFrame, a
  ``datasets.Dataset``, an Arrow table, a list of dicts; optional ``completion_ids``);
* ``fmt="verl"`` (``labkit.io.verl_dump``, ``labkit.io.verl``): the rollout dump of
  ``trainer.rollout_data_dir`` (``<step>.jsonl``: ``input``, ``output``, ``score``, ``step``,
  the reward function's extras), a batch in memory (a ``DataProto`` or a dict of tensors:
  ``responses``, ``response_mask``, ``token_level_scores`` / ``token_level_rewards``, ``uid``,
  optional ``old_log_probs``, ``entropys``, ``advantages``), or a ``DataProto`` saved with
  ``save_to_disk`` (a pickle: only with ``trust_pickle=True``).

Logged text is grouped by (training step, prompt), its reward is the framework's (or
``reward=``), and it is cut into positions by the user's ``tokenizer`` or into characters
(``labkit.io.text_rows``, ``labkit.io.text_positions``); what the framework logged beside it
(per-function rewards, advantages, steps) is kept in ``info``. A position's display string is
not stored per position (``text`` stays None): ``labkit.io.text_positions.display_text`` gives
it (``chr(id)`` for a character, ``info['vocab_text']`` for a token). A run's files are streamed
by :func:`iter_rollouts` like a record-format file, and ``rows=`` reads only the files (TRL) or
lines (verl) holding the rows asked for. Arrays, tensors and Arrow lists are accepted wherever
the format says list.
"""
from labkit.io.api import DEFAULT_BATCH_ROWS, FORMATS, iter_rollouts, read_rollouts, write_rollouts
from labkit.io.errors import RecordError
from labkit.io.record import load_schema
from labkit.io.trl import to_trl
from labkit.io.verl import to_verl_batch

__all__ = ["DEFAULT_BATCH_ROWS", "FORMATS", "RecordError", "iter_rollouts", "load_schema", "read_rollouts", "to_trl",
           "to_verl_batch", "write_rollouts"]
