"""Notebook 00's decision tree answered from measured quantities.

The tree is ``labkit.survey.decision_tree`` (one specification, the one notebook 00 draws); this
module only says where each answer comes from:

* tokens per trajectory: the median *episode* length in tokens, generated plus environment
  output, padding excluded. Why not generated tokens alone: the tree's thresholds count the
  whole episode (100K-1M tokens "with many tools" is mostly tool output), and for data
  without tool output the two are the same number. Data whose positions are **characters**
  (text logged without token ids and read without a tokenizer) is converted at
  :data:`CHARS_PER_TOKEN` characters per token, and the evidence says so;
* reward density: "per_step" when intermediate rewards exist (a non-zero reward before the last
  generated position in at least ``INTERMEDIATE_MIN_SHARE`` of trajectories), else "outcome";
* stochastic environment: the prefix-repeat estimate of ``measure_stochasticity`` above
  ``STOCHASTIC_THRESHOLD``; when nothing repeats it cannot be measured and is taken as "no"
  (said so in the report) unless the caller states it;
* can replay / privileged information: properties of the training rig, not of the data. They
  are arguments, and the report says they were given, not measured.
"""
from __future__ import annotations

from dataclasses import dataclass

from labkit.core.checks import check_bool, check_choice
from labkit.diagnose.results import INTERMEDIATE_MIN_SHARE, Lengths, RewardStats, Stochasticity
from labkit.survey.decision_tree import QUESTIONS, DecisionInputs, Recommendation, recommend

__all__ = ["Answer", "decision_inputs", "walk_tree", "CHARS_PER_TOKEN"]

#: Characters per token assumed when lengths are counted in characters: the usual rate of
#: English text under the BPE tokenizers LLMs use (about four characters a token). The tree's
#: length thresholds are orders of magnitude apart, so the rate only has to be about right; a
#: tokenizer (``tokenizer=``) makes the count exact.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Answer:
    """One question on the path: the tree's ``question`` and ``answer``, the ``evidence`` behind
    it (the number, or the argument), and its ``source``: "measured", "given" (an argument) or
    "assumed" (not measurable and not given)."""
    question: str
    answer: str
    evidence: str
    source: str


def decision_inputs(lengths: Lengths, rewards: RewardStats, stochasticity: Stochasticity, *,
                    can_replay: bool | None = False, privileged_info: bool | None = False,
                    stochastic_env: bool | None = None,
                    unit: str = "token") -> tuple[DecisionInputs, dict[str, tuple[str, str]]]:
    """The tree's inputs from measured quantities, and per question id of
    ``labkit.survey.decision_tree.QUESTIONS`` the (evidence, source) behind its answer.

    ``stochastic_env`` None means measured (or assumed False when not measurable); True or
    False overrides the measurement and is reported as given. ``can_replay`` /
    ``privileged_info`` None: not stated; the tree walks on False, reported as assumed (and a
    report shows no caveat about them). ``unit``: what a position is,
    "token" or "character" (lengths in characters are converted for the tree's thresholds,
    which count tokens)."""
    stated = {}
    for name, value in (("can_replay", can_replay), ("privileged_info", privileged_info)):
        stated[name] = None if value is None else check_bool(name, value)
    can_replay, privileged_info = bool(stated["can_replay"]), bool(stated["privileged_info"])
    if stochastic_env is not None:
        stochastic_env = check_bool("stochastic_env", stochastic_env)
    unit = check_choice("unit", unit, ("token", "character"))
    per_token = CHARS_PER_TOKEN if unit == "character" else 1
    tokens = max(1, int(round(lengths.episode_median / per_token)))
    tool = lengths.episode_median - lengths.generated_median
    length = (f"median episode length {lengths.episode_median:,.1f} {unit}s (generated median "
              f"{lengths.generated_median:,.1f}; range {lengths.episode_min:,}-{lengths.episode_max:,})"
              + (f"; tool output adds {tool:,.1f} at the median" if tool > 0 else ""))
    if unit == "character":
        length += (f"; the tree's thresholds count tokens, so this is taken as about {tokens:,} tokens at "
                   f"{CHARS_PER_TOKEN} characters per token (no token ids and no tokenizer: pass one for exact "
                   f"counts)")
    evidence = {
        "length": (length, "measured"),
        "density": (f"{rewards.share_intermediate:.1%} of trajectories have a non-zero reward before their "
                    f"last generated token (per-step if >= {INTERMEDIATE_MIN_SHARE:.0%})", "measured"),
    }
    for qid, name in (("replay", "can_replay"), ("privileged", "privileged_info")):
        if stated[name] is None:
            evidence[qid] = (f"not stated: taken as {name}=False (a property of the training rig, not readable "
                             f"from rollouts; pass {name}= to state it)", "assumed")
        else:
            evidence[qid] = (f"given: {name}={stated[name]} (a property of the training rig, not readable from "
                             f"rollouts)", "given")
    if stochastic_env is not None:
        evidence["stochastic"] = (f"given: stochastic_env={stochastic_env} (measured: {stochasticity.summary()})",
                                  "given")
        stochastic = stochastic_env
    elif stochasticity.measurable:
        stochastic = bool(stochasticity.stochastic)
        evidence["stochastic"] = (f"{stochasticity.summary()}; stochastic if > {stochasticity.threshold}",
                                  "measured")
    else:
        stochastic = False
        evidence["stochastic"] = (f"{stochasticity.summary()}; assumed deterministic (pass "
                                  f"stochastic_env= to state it)", "assumed")
    inputs = DecisionInputs(tokens, "per_step" if rewards.intermediate else "outcome", stochastic,
                            can_replay, privileged_info)
    return inputs, evidence


def walk_tree(inputs: DecisionInputs, evidence: dict[str, tuple[str, str]]) -> tuple[Recommendation, list[Answer]]:
    """Walk the tree with ``inputs`` (``labkit.survey.recommend``) and attach to each question on
    the path the evidence behind its answer. A question the evidence does not cover (the tree
    grew a question this module does not know) raises a ValueError naming ``evidence``."""
    rec = recommend(inputs.trajectory_tokens, inputs.reward_density, inputs.stochastic_env,
                    inputs.can_replay, inputs.privileged_info)
    by_text = {q.text: qid for qid, q in QUESTIONS.items()}
    answers = []
    for question, answer in rec.path:
        qid = by_text[question]
        if qid not in evidence:
            raise ValueError(f"evidence: no measured or given answer for the tree's question {qid!r} "
                             f"({question}); labkit.diagnose.decide must learn it")
        text, source = evidence[qid]
        answers.append(Answer(question, answer, text, source))
    return rec, answers
