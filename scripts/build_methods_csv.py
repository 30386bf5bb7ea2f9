"""Build data/methods.csv and data/baselines.csv from the survey catalog plus the tables below.

    python scripts/build_methods_csv.py            # (re)write both files
    python scripts/build_methods_csv.py --check    # exit 1 if the committed files differ

Where each column comes from
----------------------------
* id, title, year, collection, paper_url, code_url: the survey authors' catalog
  (``survey_catalog.csv``, MIT licence, see data/survey_catalog.LICENSE), copied as facts.
* survey_number, name, type, setting, granularity tag, methodology tag, baseline family,
  evidence, benchmarks of the 47 survey methods: the survey's Appendix B (arXiv 2604.09459),
  typed in below as :data:`APPENDIX_B`. For later additions: the catalog's scope, setting,
  granularity and methodology columns, mapped as described in ``labkit/survey.py``.
* granularity and methodology_family: derived from the tags with the tables in
  ``labkit.survey`` (GRANULARITY_LABELS, METHODOLOGY_TO_FAMILY), the single source of truth.
* description, labkit_function, notebook, status, status_note: written for this lab
  (:data:`DESCRIPTIONS`, :data:`LAB`). Descriptions deliberately do not reuse the catalog's
  wording; tests/test_survey.py checks that.

The catalog is looked up at --catalog, else $LABKIT_SURVEY_CATALOG, else data/survey_catalog.csv
(shipped with the lab).
"""
from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labkit.survey import (  # noqa: E402  (needs the sys.path line above)
    BASELINE_COLUMNS, GRANULARITY_LABELS, METHOD_COLUMNS, METHODOLOGY_TO_FAMILY, SETTINGS,
    load_baselines, load_methods,
)

CATALOG_CANDIDATES = (REPO / "data" / "survey_catalog.csv",)
OUT_METHODS = REPO / "data" / "methods.csv"
OUT_BASELINES = REPO / "data" / "baselines.csv"

# ---------------------------------------------------------------------------------------------
# Appendix B of the survey: id -> (number, name, type, setting, granularity tag, methodology tag,
# baseline family letter, evidence letter, primary benchmarks). Letters as in the appendix:
# type C/E, setting R/A/M (A/M = both), BL G/P/D/O/T ("" for the appendix's dash), Ev. S/L/A.
# ---------------------------------------------------------------------------------------------
APPENDIX_B: dict[str, tuple[int, str, str, str, str, str, str, str, str]] = {
    "2410.01679": (1, "VinePPO", "C", "R", "Token", "MC", "P", "S", "GSM8K, MATH"),
    "2411.08302": (2, "RED", "C", "R", "Token", "Redistribution", "P", "L", "MATH"),
    "2412.02685": (3, "T-REG", "C", "R", "Token", "Self-generated", "P", "L", "GSM8K, MATH"),
    "2404.12358": (4, "From r to Q*", "C", "R", "Token", "Implicit", "D", "A",
                   "Theoretical analysis"),
    "2505.23564": (5, "SPO", "C", "R", "Segment", "MC", "G", "S", "MATH-500, GSM8K"),
    "2505.20417": (6, "SCAR", "C", "R", "Segment", "Game-theoretic", "G", "L", "MATH"),
    "2509.18314": (7, "TEMPO", "C", "R", "Token/Seg", "Tree-TD", "P", "L", "MATH, GSM8K"),
    "2504.08662": (8, "PURE", "C", "R", "Step", "Min-form PRM", "G", "S", "MATH-500, AIME'24"),
    "2507.01551": (9, "SPRO", "C", "R", "Step", "Masked Adv.", "G", "S", "MATH-500, AMC"),
    "2508.02298": (10, "CAPO", "C", "R", "Step", "LLM-as-Critic", "G", "S", "MATH-500, AIME'24"),
    "2510.08899": (11, "ACPO", "C", "R", "Step", "Attribution", "G", "L", "MATH"),
    "2509.03646": (12, "HICRA", "C", "R", "Step", "Hierarchy", "G", "S", "AIME'24, AIME'25"),
    "2601.10201": (13, "PRL", "C", "R", "Step", "Entropy-RL", "G", "L", "MATH, GSM8K"),
    "2601.14209": (14, "InT", "C", "R", "Step", "Intervention", "G", "L", "MATH"),
    "2601.05688": (15, "FinePO", "C", "R", "Sub-step", "Fine PRM", "", "L",
                   "Domain-specific (visual)"),
    "2402.19446": (16, "ArCHer", "C", "A", "Turn", "TD (hierarchical)", "T", "S",
                   "Multi-turn dialogue"),
    "2411.03817": (17, "StepAgent", "C", "A", "Step", "Implicit+IRL", "G", "L", "Tool-use tasks"),
    "2405.15821": (18, "POAD", "C", "A", "Token/Turn", "Action Decomp.", "P", "S",
                   "Interactive tasks"),
    "2505.10978": (19, "GiGPO", "C", "A", "Step", "MC (group)", "G", "S", "ALFWorld, WebShop"),
    "2503.15478": (20, "SWEET-RL", "C", "A", "Turn", "Privileged Critic", "D", "S",
                   "ColBench Backend"),
    "2511.08325": (21, "AgentPRM", "C", "A", "Step", "TD+GAE", "O", "S", "WebShop, TextCraft"),
    "2505.11821": (22, "Turn-Level Reward Design", "C", "A", "Turn", "Hybrid", "G", "L",
                   "Web navigation"),
    "2512.17008": (23, "Turn-PPO", "C", "A", "Turn", "Turn-level MDP", "G", "S", "WebShop"),
    "2511.20718": (24, "SORL", "C", "A", "Turn", "Bias-corrected", "G", "L", "Multi-turn search"),
    "2509.14480": (25, "TARL", "C", "A", "Turn", "LLM-Judge", "G", "S", "tau-bench"),
    "2603.23550": (26, "ITPO", "C", "A", "Turn", "Implicit", "D", "L", "Dialogue tasks"),
    "2510.14967": (27, "IGPO", "C", "A", "Turn", "Info-theoretic", "G", "L", "Agentic tasks"),
    "2512.04949": (28, "CARL", "C", "A", "Step", "Entropy-based", "G", "S", "HotpotQA, 2WikiMQA"),
    "2509.19199": (29, "iStar", "C", "A", "Step", "Implicit DPO", "D", "L", "Trajectory pairs"),
    "2508.00344": (30, "PilotRL", "C", "A", "Step", "Progressive", "G", "L", "Agentic planning"),
    "2412.16989": (31, "LaRe", "C", "A", "Step", "LLM-Critic", "G", "L", "Symbolic + agentic"),
    "2603.08754": (32, "HCAPO", "C", "A", "Turn", "Hindsight", "G", "S", "Agentic tasks"),
    "2603.06859": (33, "C3", "C", "A/M", "Turn", "Counterfactual", "G", "L",
                   "Multi-agent + agentic"),
    "2603.21563": (34, "CCPO", "C", "A/M", "Turn", "Counterfactual", "G", "L", "Agentic tasks"),
    "2511.12159": (35, "CriticSearch", "C", "A", "Turn", "Retrospective Critic", "G", "S",
                   "Multi-hop QA"),
    "2505.20732": (36, "SPA-RL", "E", "A", "Step", "MLP estimator", "G", "L", "Agentic tasks"),
    "2508.03680": (37, "Agent Lightning", "E", "A", "Step", "Decoupled Arch.", "G", "L",
                   "Multi-turn agents"),
    "2504.20073": (38, "RAGEN", "E", "A", "Step", "Uncertainty", "G", "S", "Benchmark suite"),
    "2601.03555": (39, "SCRIBE", "E", "A", "Step", "Skill-prototype", "G", "L", "Agentic tasks"),
    "2512.07478": (40, "PRS", "E", "A", "Step", "Progressive", "G", "S", "Progressive tasks"),
    "2411.00809": (41, "AdaptSeg", "E", "A", "Segment", "Segmentation", "G", "L", "Agentic tasks"),
    "2511.13288": (42, "M-GRPO", "C", "M", "Multi-Agent", "Hierarchical", "G", "L",
                   "Multi-agent tasks"),
    "2502.16863": (43, "LLM-MCA", "C", "M", "Multi-Agent", "LLM-Critic", "G", "L",
                   "Multi-agent eval"),
    "2504.12961": (44, "QLLM", "C", "M", "Multi-Agent", "LLM-generated", "G", "L",
                   "Multi-agent tasks"),
    "2602.08335": (45, "SHARP", "C", "M", "Multi-Agent", "Shapley", "G", "S",
                   "Multi-agent tasks"),
    "2601.23228": (46, "MAPPA", "C", "M", "Multi-Agent", "Per-action PRM", "G", "S", "AIME, AMC"),
    "2602.08847": (47, "Dr. MAS", "C", "M", "Multi-Agent", "Agent-wise Adv.", "G", "S",
                   "Math tasks"),
}

#: Short names for the catalog's later additions (the catalog has only titles).
RECENT_NAMES: dict[str, str] = {
    "2510.00194": "GRPO-lambda",
    "2605.21467": "DelTA",
    "2605.22074": "SCRL",
    "2606.32017": "TRIAGE",
    "2601.07408": "OAR",
    "2606.29476": "CRAFT",
    "2606.18810": "SC-GRPO",
    "2606.04889": "GRAIL",
    "2605.10325": "VPR",
    "2606.12384": "APPO",
    "2606.26790": "OPID",
    "2605.11775": "PAPO",
    "2606.26080": "Progress Advantage",
    "2606.32034": "QVal",
    "2606.19236": "STARE",
    "2605.25381": "Temporal Scheduling",
    "2605.15155": "SDAR",
    "2601.04767": "AT2PO",
    "openreview-RY47Tq0VsV": "GVPO",
    "2605.00425": "AEM",
    "2605.02178": "T2PO",
    "2605.02801": "Orchestration Traces",
    "2605.06200": "A2TGPO",
    "2605.08013": "A3",
    "2605.08061": "Rubric-Grounded RL",
    "2605.06920": "In-Context Core Credit",
}

TYPE_LETTER = {"C": "core", "E": "enabler"}
SETTING_LETTERS = {"R": "reasoning", "A": "agentic", "M": "multi-agent", "A/M": "agentic;multi-agent"}
BL_LETTER = {"G": "GRPO", "P": "PPO", "D": "DPO", "O": "ORM", "T": "TD", "": ""}
EV_LETTER = {"S": "strong", "L": "limited", "A": "analytical"}
SCOPE_TO_TYPE = {"Core": "core", "Near-Core": "enabler", "Adjacent": "enabler"}  # else related
CATALOG_SETTING = {"Reasoning RL": "reasoning", "Agentic RL": "agentic",
                   "Multi-Agent RL": "multi-agent", "Related / Non-policy RL": "other"}

# ---------------------------------------------------------------------------------------------
# What each method's credit mechanism computes, in this lab's words.
# ---------------------------------------------------------------------------------------------
DESCRIPTIONS: dict[str, str] = {
    # ----- survey methods -----
    "2410.01679": "Drops PPO's learned critic: the value of a reasoning prefix is the average "
                  "final reward of several fresh completions sampled from it, and each step's "
                  "advantage is how much that estimate moves across the step.",
    "2411.08302": "Scores every prefix of a response with an unchanged, off-the-shelf "
                  "sequence-level reward model and hands each token the change in score it "
                  "causes, so PPO trains on dense token rewards instead of one terminal number.",
    "2412.02685": "Prompts the model twice with opposite instructions (make the answer better / "
                  "make it worse) and uses the per-token log-probability gap between the two as "
                  "a self-made token reward that regularises how DPO spreads its sequence-level "
                  "preference over tokens.",
    "2404.12358": "Proves that the per-token log-likelihood ratio of a DPO-tuned model against "
                  "its reference acts as an optimal soft advantage in a token-level MDP, so a "
                  "preference-trained model already encodes token credit that can be read off "
                  "directly.",
    "2505.23564": "Cuts the chain of thought into segments at low-probability tokens, estimates "
                  "the value at each cut from a handful of sampled completions, and credits each "
                  "segment with the value increase across it.",
    "2505.20417": "Treats text spans as players in a cooperative game whose payoff is the reward "
                  "model's score on a partial response, and gives each span its sampled Shapley "
                  "value; the span credits add back up to the full score.",
    "2509.18314": "Grows several continuations from shared prefixes so the rollouts form a tree; "
                  "a node's value is the mean outcome of the leaves below it, and tokens at "
                  "branch points get a child-minus-parent correction on top of the group "
                  "advantage, with no learned critic.",
    "2504.08662": "Turns process-reward-model step scores into returns with a soft minimum over "
                  "the steps that follow instead of a sum, so a solution is only as good as its "
                  "worst step and padding it with harmless steps cannot raise the credit.",
    "2507.01551": "Derives process rewards from the policy's own log-ratio to a reference model "
                  "(no separate PRM), accumulates them along each response, and at every step "
                  "compares a response with the other group samples still active at that step, "
                  "a masked group baseline.",
    "2508.02298": "Has a language model act as a verifier that writes a critique of every step "
                  "in a sampled solution; the steps it flags, agreed across several critiques, "
                  "receive penalties that are added to the outcome reward.",
    "2510.08899": "Estimates how much each reasoning step contributed to the verified answer "
                  "with an attribution signal, factors the outcome reward over steps with those "
                  "weights, and orders training problems by how concentrated that credit is.",
    "2509.03646": "Identifies the tokens that carry high-level strategy (choosing, checking or "
                  "revising an approach) and adds an extra bonus proportional to the advantage's "
                  "size on them, so updates emphasise strategic choices over routine "
                  "computation.",
    "2601.10201": "Works backwards from the entropy-regularised RL objective to the step reward "
                  "an optimal policy implies, so each step is credited with its soft advantage "
                  "rather than a heuristic verifier score.",
    "2601.14209": "Lets the model propose a rewrite of a single step in its own failed reasoning "
                  "and checks whether the rewrite turns the outcome around; the step whose "
                  "replacement flips the result takes the blame, and the repaired trace becomes "
                  "training signal.",
    "2601.05688": "Inside a chart and diagram reasoning pipeline, grades the individual "
                  "operations within each reasoning step, so credit lands below the level of a "
                  "whole step.",
    "2402.19446": "Splits learning into two levels: a high-level critic learns the value of each "
                  "complete utterance from replayed past episodes by temporal-difference backups, "
                  "and a low-level token policy is updated with fresh samples to produce "
                  "utterances that critic rates highly.",
    "2411.03817": "Compares the agent's steps with an expert's and learns, in inverse-RL "
                  "fashion, a per-step reward that explains the expert's choices; the agent "
                  "trains on those inferred step rewards with tasks ordered from easy to hard.",
    "2405.15821": "Breaks each multi-token action into its tokens and runs Bellman backups both "
                  "inside an action (token to token) and between actions, so one token-level "
                  "critic distributes credit within and across turns.",
    "2505.10978": "Adds a second, step-level group on top of GRPO's episode group: steps from "
                  "different rollouts of the same task that reach an identical environment state "
                  "are pooled, and each action's discounted return is compared with that pool's "
                  "mean.",
    "2503.15478": "Trains a turn-level critic that sees training-only information the agent "
                  "never sees (such as the reference solution) and uses its per-turn advantage "
                  "scores to rank candidate actions, training the actor on the resulting "
                  "preferences.",
    "2511.08325": "Learns a step-level value model for agent trajectories from temporal-difference "
                  "targets with GAE instead of costly Monte Carlo labelling, scoring each step by "
                  "its promise (expected success) and its progress (value change).",
    "2505.11821": "Scores every turn of an agent dialogue separately: where the turn's result can "
                  "be checked by a program it gets an exact check, elsewhere a language-model "
                  "grader supplies the score, and the per-turn rewards enter a turn-aware "
                  "advantage.",
    "2512.17008": "Recasts a multi-turn episode as an MDP whose actions are whole turns, learns "
                  "a value per turn, and computes PPO's advantages and probability ratios per "
                  "turn instead of per token.",
    "2511.20718": "Stabilises off-policy multi-turn training by forming importance ratios per "
                  "turn and renormalising the update whenever clipping fires on too many of them "
                  "(SO-PPO and SO-GRPO variants).",
    "2509.14480": "Uses an LLM judge to grade each turn of a tool-use interaction and folds these "
                  "grades into the RL signal, alongside a training mix that adds math problems "
                  "to the agent tasks.",
    "2603.23550": "Treats the policy's own likelihood ratio against a frozen reference, summed "
                  "over the tokens of a turn, as that turn's implicit reward, so a sparse "
                  "end-of-conversation outcome becomes per-turn credit without training a reward "
                  "model.",
    "2510.14967": "After every turn, measures how probable the policy finds the gold answer given "
                  "the dialogue so far; the rise since the previous turn is that turn's reward, "
                  "with the final outcome added at the end.",
    "2512.04949": "Measures the policy's entropy at each decision and restricts the "
                  "policy-gradient update to the few most uncertain actions, treating confident "
                  "ones as routine and skipping them.",
    "2509.19199": "Fits an implicit reward model on pairs of whole trajectories with a DPO-style "
                  "loss, reads its per-step log-likelihood ratio as that step's reward, and adds "
                  "the resulting step advantage to the usual episode advantage.",
    "2508.00344": "Trains an agent in stages around an explicit global plan, first rewarding the "
                  "plan, then the steps that carry it out, then the whole behaviour, so credit is "
                  "introduced from coarse to fine over training.",
    "2412.16989": "Uses an LLM's understanding of each step to build a multi-dimensional latent "
                  "reward representation, from which a model learns to split the single "
                  "episodic return across steps.",
    "2603.08754": "After an episode ends, asks the LLM itself how likely each of its past actions "
                  "looks given that outcome; the ratio of this hindsight probability to the "
                  "original action probability re-weights the step's value, which is combined "
                  "with episode-level advantages.",
    "2603.06859": "Credits a turn (or an agent's message) with the gap between the realised "
                  "outcome and the outcome when that turn alone is regenerated or replaced while "
                  "everything else stays fixed, i.e. a leave-one-out comparison.",
    "2603.21563": "For collaborating agents, compares the team's outcome with counterfactual "
                  "runs in which one agent's contribution is taken away (for example the partner "
                  "solving alone) and rewards each role with the resulting causal difference.",
    "2511.12159": "Once a search episode is over, a frozen critic LLM that is shown the gold "
                  "answer and the whole trajectory rates each search turn as helpful or not, and "
                  "these ratings become dense turn rewards.",
    "2505.20732": "Trains a small progress estimator so that its per-step contributions add up "
                  "to the episode's final reward, then uses each step's estimated contribution "
                  "as that step's immediate reward.",
    "2508.03680": "A training system that separates running an agent from training it by "
                  "logging every LLM call of any agent framework as a transition; its LightningRL "
                  "recipe passes the episode outcome to those calls so single-turn RL can train "
                  "on them.",
    "2504.20073": "Studies multi-turn agent RL (the StarPO framework) and its collapse into "
                  "repetitive behaviour; its stabiliser keeps only the prompts whose sampled "
                  "rollouts disagree most in reward and drops the rest from the update.",
    "2601.03555": "Gives mid-level supervision for tool use by matching each subgoal to a library "
                  "of skill templates and having a grader score the step against what that "
                  "template expects, between token-level and episode-level credit.",
    "2512.07478": "Changes what is rewarded as training goes on, from well-formed output early to "
                  "correct answers later, while a value-based sampler (VSPO) favours prompts "
                  "whose rollouts carry an informative signal.",
    "2411.00809": "Cuts responses into semantically coherent pieces and attaches a dense reward "
                  "to each piece, sized so that long and short responses get feedback at a "
                  "comparable grain.",
    "2511.13288": "For a main agent that calls sub-agents, computes group-relative advantages "
                  "separately for the coordinating agent and for the sub-agents' calls, aligning "
                  "uneven numbers of sub-agent calls so the hierarchy can be trained with "
                  "decoupled updates.",
    "2502.16863": "Hands the complete multi-agent transcript to an LLM acting as one central "
                  "critic; it reasons about what each agent contributed at each step, and its "
                  "per-agent judgements become individual rewards.",
    "2504.12961": "Has an LLM write an explicit credit function as executable code that combines "
                  "per-agent values into the team value, replacing the learned mixing network of "
                  "value-decomposition methods without extra training.",
    "2602.08335": "Gives each agent a reward with three parts: the team's overall accuracy, the "
                  "agent's own Shapley marginal contribution estimated over coalitions of agents, "
                  "and a tool-execution term; advantages are then normalised per agent across "
                  "groups.",
    "2601.23228": "An AI judge grades each individual action of every agent in the team, so one "
                  "task outcome becomes a dense set of per-agent, per-action scores to train on.",
    "2602.08847": "Normalises advantages separately for each agent with that agent's own reward "
                  "mean and spread, instead of one team-wide statistic that mis-scales agents "
                  "whose rewards are distributed differently.",
    # ----- later additions -----
    "2510.00194": "Approximates a lambda-return inside GRPO without a value network: after each "
                  "sampled response, a trace over the tokens' log-probabilities decays the "
                  "group-relative signal backwards through the sequence, so earlier and later "
                  "tokens are credited differently.",
    "2605.21467": "Assigns every token a weight reflecting how strongly its gradient direction "
                  "separates rewarded from unrewarded samples, and scales the verifiable-reward "
                  "update with those weights.",
    "2605.22074": "Turns the intermediate results of a solution into smaller questions that can "
                  "each be checked, trains on them as a curriculum, and gives the part of the "
                  "response answering each one a group-normalised score of its own.",
    "2606.32017": "A judge sorts each action segment into one of four roles (decisive progress, "
                  "helpful exploration, no-progress plumbing, regression) and a fixed lookup "
                  "turns the role into a small capped reward on top of the outcome advantage, so "
                  "failed runs still credit good exploration and successful runs still penalise "
                  "backtracking.",
    "2601.07408": "Estimates for each token how much the final answer's correctness hinges on "
                  "it, by perturbing the token or through a cheaper gradient-based proxy, and "
                  "reshapes the GRPO advantage so sensitive tokens receive more of it.",
    "2606.29476": "Recycles the other samples GRPO already drew for the same prompt: weighting "
                  "them by the teacher-student log-probability gap gives a signed estimate of how "
                  "favouring the teacher's preferred token would change the group advantage, and "
                  "that estimate gates a self-distillation loss.",
    "2606.18810": "Shows the model one of its own checked-correct solutions, measures for every "
                  "token how far its next-token distribution moves compared with the unprompted "
                  "model (a KL divergence), and uses that shift as a multiplier on the token's "
                  "policy-gradient weight.",
    "2606.04889": "Computes a saliency score per token from gradients and activations and uses it "
                  "to hand the single sequence advantage out unevenly, so tokens that matter more "
                  "to the output receive more of it.",
    "2605.10325": "Where a program or solver can check partial progress (a puzzle state, a "
                  "planning subgoal), each turn is verified against it, giving the agent exact "
                  "per-turn rewards instead of one terminal bit.",
    "2606.12384": "Picks where to fork extra continuations with a branching score (token "
                  "uncertainty plus how much the policy's likelihood of what follows rises), then "
                  "rescales advantages per branched procedure so credit lands on decision points "
                  "inside the reasoning rather than at tool-call boundaries.",
    "2606.26790": "Distils finished rollouts into short hindsight skills (a whole-task strategy, "
                  "or advice for a critical step), re-scores each sampled response with the skill "
                  "placed in context, and adds the per-token log-probability shift this causes "
                  "to the outcome advantage.",
    "2605.11775": "Classifies each token update by the direction it would push policy entropy, "
                  "up or down, and scales advantages differently for the two directions, giving "
                  "explicit control over entropy during fine-tuning.",
    "2606.26080": "Compares how much more likely an RL-tuned model finds each step than its "
                  "pre-RL starting model does; that per-step likelihood gain acts as a free "
                  "progress score for crediting steps and for spotting where a failed run went "
                  "wrong.",
    "2606.32034": "Not a trainer but a yardstick: it measures cheaply, without any training, "
                  "whether a proposed per-step score orders actions the same way as the Q-values "
                  "of a fixed reference policy on long agent tasks.",
    "2606.19236": "Scales each token's advantage by its surprisal (the negative log-probability "
                  "of the sampled token) so that rare and common tokens move the policy's entropy "
                  "in a controlled way instead of collapsing it.",
    "2605.25381": "Changes the token-selection rule as training progresses: early updates "
                  "concentrate on tokens singled out by trajectory-percentile criteria, and the "
                  "focus is relaxed step by step back to ordinary all-token optimisation.",
    "2605.15155": "Adds on-policy distillation from a teacher (the same model given extra "
                  "privileged context) to GRPO as a side loss, passing the teacher-student token "
                  "gap through a sigmoid gate so tokens the teacher endorses are distilled "
                  "strongly and its rejections only softly.",
    "2601.04767": "Grows a search tree over turns, branching where the policy is most uncertain, "
                  "and credits each turn by comparing the outcomes below it with those of its "
                  "sibling branches.",
    "openreview-RY47Tq0VsV": "Adds step-level correction terms, computed from what execution "
                             "reports along the way (syntax errors, runtime exceptions), to the "
                             "usual group-relative outcome advantage of a coding-agent rollout.",
    "2605.00425": "Watches how the entropy of each whole response shifts during multi-turn "
                  "training and scales that response's advantage up or down accordingly; no "
                  "reward model or judge is involved.",
    "2605.02178": "Tracks the model's uncertainty while it thinks and cuts the thought short once "
                  "uncertainty stops falling; turns that make no exploratory headway are "
                  "discarded and sampled again, so fewer updates go to uninformative actions.",
    "2605.02801": "A survey-style framework: it represents multi-agent LLM runs as time-ordered "
                  "interaction graphs (spawn, delegate, message, aggregate, stop) and catalogues "
                  "which unit, from a single token up to the whole team, each published method "
                  "attaches its reward to.",
    "2605.06200": "Starts from per-turn information-gain rewards, normalises them among turns at "
                  "the same position across the group, rescales their running sum to keep its "
                  "variance in check, and gives each turn its own clipping range in the policy "
                  "update.",
    "2605.08013": "For command-line agents, forms each turn's advantage from three parts: the "
                  "episode's group-relative outcome, residuals comparing structurally similar "
                  "shell commands (matched through their syntax trees), and margins between "
                  "branches of a rollout tree.",
    "2605.08061": "A grader model checks a response criterion by criterion against a rubric and "
                  "adds up the satisfied items into a graded reward, replacing a single "
                  "pass/fail verdict.",
    "2605.06920": "Divides the value of a generated output among the creators whose work was "
                  "placed in the model's context, choosing the least-core split (no group of "
                  "creators is left much worse off than it could manage alone) and approximating "
                  "it with few model calls; attribution among sources, not policy training.",
}

JUDGE = "stand-in judge planned: "
LATER = "Added to the catalog after the survey snapshot; not scheduled. "

# ---------------------------------------------------------------------------------------------
# The lab plan: id -> (labkit_function, notebook, status, status_note)
# ---------------------------------------------------------------------------------------------
LAB: dict[str, tuple[str, str, str, str]] = {
    # ----- survey methods: planned -----
    "2410.01679": ("labkit.credit.mc.vineppo", "03_vineppo.ipynb", "implemented",
                   "Vines forked from the tiny LM's step prefixes, checked against cached "
                   "256-vine Monte Carlo truth; notebook 03 shows value error for K = 1-16, its "
                   "cost, and cached 3-seed RL runs against GRPO and PPO."),
    "2411.08302": ("labkit.credit.redistribution.red", "07_critical_actions.ipynb", "planned",
                   "A small reward model trained on the lab's own outcomes stands in for the "
                   "RLHF reward model."),
    "2404.12358": ("labkit.credit.implicit.dpo_implicit_q", "04_process_rewards.ipynb", "planned",
                   "Log-ratio credit of a preference-tuned policy compared with exact Q values."),
    "2505.23564": ("labkit.credit.mc.spo", "04_process_rewards.ipynb", "planned",
                   "Cut points at low-probability tokens; segment values from sampled "
                   "continuations."),
    "2505.20417": ("labkit.credit.multiagent.scar", "09_multiagent.ipynb", "implemented",
                   "Exact Shapley over the tiny LM's reasoning segments; the payoff is the "
                   "verifier's reward of model continuations (a missing segment is rewritten by "
                   "the model, or deleted: both games in notebook 09) instead of the paper's "
                   "reward model scoring partial text, and segments are the ';' steps rather "
                   "than adaptive spans."),
    "2509.18314": ("labkit.credit.mc.tempo", "04_process_rewards.ipynb", "planned",
                   "Tree of forked continuations; node values from the leaf outcomes."),
    "2504.08662": ("labkit.credit.process.pure_min_form", "04_process_rewards.ipynb", "planned",
                   "Min-form vs sum-form credit over the same step scores, including the "
                   "padding exploit."),
    "2507.01551": ("labkit.credit.process.spro", "04_process_rewards.ipynb", "planned",
                   "Check the mechanism before implementing: the survey describes a "
                   "leave-one-step-out drop, the paper's abstract a cumulative implicit process "
                   "reward with a masked group baseline."),
    "2508.02298": ("labkit.credit.judge.capo", "04_process_rewards.ipynb", "planned",
                   JUDGE + "a step verifier with a known error rate, built from the task's exact "
                   "step correctness, replaces the LLM critic."),
    "2509.03646": ("labkit.credit.entropy.hicra", "04_process_rewards.ipynb", "planned",
                   "Planning tokens are known by construction in the arithmetic task."),
    "2402.19446": ("labkit.credit.td.archer", "05_why_agents_harder.ipynb", "implemented",
                   "Turn advantage Q - V from a tabular off-policy TD(0) critic "
                   "(labkit.critics.TurnQCritic) on ToolWorld; tested against the exact DP values; "
                   "notebook 05 does not show it yet."),
    "2505.10978": ("labkit.credit.group.gigpo", "06_gigpo.ipynb", "implemented",
                   "Anchor groups from identical ToolWorld observations; notebook 06 measures the "
                   "singleton share, the step term against the exact advantage and 5-seed "
                   "learning curves against GRPO under two loss aggregations."),
    "2503.15478": ("labkit.credit.privileged.sweet_rl", "08_hindsight_counterfactual.ipynb",
                   "implemented", "A tabular Bradley-Terry critic whose privileged input is "
                   "ToolWorld's hidden state (bug location, fix flag), fitted on winner/loser "
                   "episode pairs; it ranks every candidate action per turn and returns the "
                   "best-vs-worst preference pairs SWEET-RL trains on (the DPO actor step is not "
                   "run). Notebook 08 compares it with the same critic on observations only."),
    "2511.08325": ("labkit.credit.td.turn_gae", "05_why_agents_harder.ipynb", "implemented",
                   "Shares the turn-level GAE estimator with Turn-PPO. "
                   "Implemented and tested (equals token-level GAE on one-token turns and return "
                   "minus value at gamma = lambda = 1); notebook 05 does not show it yet."),
    "2512.17008": ("labkit.credit.td.turn_gae", "05_why_agents_harder.ipynb", "implemented",
                   "Turn-level values and advantages, one discount per turn. "
                   "Implemented and tested (equals token-level GAE on one-token turns and return "
                   "minus value at gamma = lambda = 1); notebook 05 does not show it yet."),
    "2509.14480": ("labkit.credit.judge.tarl", "07_critical_actions.ipynb", "planned",
                   JUDGE + "per-turn grades from a noisy oracle with a known error rate."),
    "2603.23550": ("labkit.credit.implicit.itpo", "07_critical_actions.ipynb", "planned",
                   "Per-turn sums of the policy/reference log-ratio."),
    "2510.14967": ("labkit.credit.information.igpo", "07_critical_actions.ipynb", "stand-in",
                   "Stand-in: the success probability after each turn comes from the exact DP "
                   "(ToolWorld) instead of the policy's teacher-forced probability of the gold "
                   "answer; the information-gain credit on top is the paper's."),
    "2512.04949": ("labkit.credit.entropy.carl", "07_critical_actions.ipynb", "implemented",
                   "Selective update only: the top entropy fraction of turns keeps its credit; the "
                   "paper's branching from critical states is not implemented."),
    "2509.19199": ("labkit.credit.implicit.istar", "07_critical_actions.ipynb", "planned",
                   "Implicit step rewards from a DPO-style fit on trajectory pairs."),
    "2412.16989": ("labkit.credit.judge.lare", "07_critical_actions.ipynb", "planned",
                   JUDGE + "hand-made step features replace the LLM-derived latent reward."),
    "2603.08754": ("labkit.credit.hindsight.hcapo", "08_hindsight_counterfactual.ipynb", "stand-in",
                   "Stand-in for the LLM post-hoc critic: the outcome-conditioned action "
                   "probability comes from a model fitted on rollouts (exact on tabular "
                   "environments) instead of prompting an LLM. The combination (GRPO plus the "
                   "positive part of the hindsight ratio) is reconstructed from the abstract and "
                   "summaries; the method section was not available."),
    "2603.06859": ("labkit.credit.counterfactual.c3", "08_hindsight_counterfactual.ipynb",
                   "implemented", "Counterfactual outcomes by restoring ToolWorld's saved state "
                   "with the turn's action replaced by a fresh policy action and replaying, or "
                   "predicted by a learned turn Q critic where no reset is possible; both shown, "
                   "and re-execution equals the exact effect in a deterministic world (tested). "
                   "Agent-level leave-one-out is labkit.credit.multiagent.leave_one_out_credit."),
    "2603.21563": ("labkit.credit.counterfactual.ccpo", "08_hindsight_counterfactual.ipynb",
                   "implemented", "Per-turn average treatment effect by intervention: restore "
                   "the state, force each action, replay with the policy. The reference code "
                   "applies the same joint-versus-counterfactual comparison to agent roles; the "
                   "lab applies it per turn, where its exact version equals Q - V."),
    "2511.12159": ("labkit.credit.privileged.critic_search", "08_hindsight_counterfactual.ipynb",
                   "stand-in", "Stand-in judge: the critic that sees the gold answer is simulated "
                   "by the sign of the exact turn advantage, each verdict flipped with a seeded "
                   "error rate; verdicts are group-normalised and added to GRPO's credit."),
    "2505.20732": ("labkit.credit.redistribution.spa_rl", "07_critical_actions.ipynb", "planned",
                   "Small progress regressor whose step contributions sum to the outcome."),
    "2504.20073": ("labkit.credit.group.starpo_filter", "05_why_agents_harder.ipynb", "implemented",
                   "StarPO-S reward-spread filter over task groups; notebook 05 measures it in an "
                   "echo-trap setting (clip-higher and KL changes of StarPO-S are not included)."),
    "2511.13288": ("labkit.credit.multiagent.m_grpo", "09_multiagent.ipynb", "implemented",
                   "The main agent is normalised in its task group, sub-agents per (task, "
                   "sub-agent) or pooled after aligning every rollout to the same number of "
                   "sub-agent calls (duplicate or drop, our reading of the paper); decoupled "
                   "training is not modelled. With a shared team reward it equals GRPO "
                   "(notebook 09)."),
    "2502.16863": ("labkit.credit.judge.llm_mca", "09_multiagent.ipynb", "stand-in",
                   "Stand-in judge: the central critic's per-agent credit report is the exact "
                   "per-episode Shapley value plus seeded Gaussian noise; notebook 09 measures "
                   "agreement as the noise grows."),
    "2602.08335": ("labkit.credit.multiagent.sharp", "09_multiagent.ipynb", "implemented",
                   "Team, Shapley and process terms from exact coalition values of the team "
                   "task, normalised per (task group, agent); the weights are plain arguments "
                   "(the paper tunes them per benchmark) and the process term is the team "
                   "task's role score."),
    "2601.23228": ("labkit.credit.judge.mappa", "09_multiagent.ipynb", "stand-in",
                   "Stand-in judge: each action's 0-10 grade is the team task's exact local "
                   "verdict (was the action right for the task) plus seeded Gaussian noise; "
                   "grades are whitened over the batch (our reading of the paper)."),
    "2602.08847": ("labkit.credit.multiagent.dr_mas", "09_multiagent.ipynb", "implemented",
                   "Advantages normalised per (task group, agent) instead of per group; notebook "
                   "09 trains the team task with per-role rewards on different scales against "
                   "the global baseline over 5 seeds and measures per-agent gradient scale."),
    # ----- survey methods: concept-only -----
    "2412.02685": ("", "", "concept-only",
                   "Needs a model that follows 'improve / worsen this answer' prompts; the lab's "
                   "tiny LM cannot. Nearest in the lab: labkit.credit.implicit.dpo_implicit_q."),
    "2510.08899": ("", "", "concept-only",
                   "Not scheduled: its step attribution is close to the redistribution "
                   "estimators of notebook 07, and its curriculum half is data ordering, outside "
                   "the credit interface."),
    "2601.10201": ("", "", "concept-only",
                   "Mostly a derivation; the step reward it arrives at is the implicit log-ratio "
                   "already covered by labkit.credit.implicit.dpo_implicit_q."),
    "2601.14209": ("", "", "concept-only",
                   "Needs a model that can diagnose and rewrite its own reasoning steps; the "
                   "counterfactual idea is taught with C3 in notebook 08."),
    "2601.05688": ("", "", "concept-only",
                   "Built for chart and diagram reasoning; the lab has no vision tasks. Step-level "
                   "process credit is taught with PURE in notebook 04."),
    "2411.03817": ("", "", "concept-only",
                   "Needs expert demonstrations and an inverse-RL reward learner; implicit step "
                   "rewards are taught with iStar in notebook 07."),
    "2405.15821": ("", "", "concept-only",
                   "Not scheduled: backups inside each action need a token-level critic on the "
                   "agent environment; the within/between-turn split is shown with GAE (02) and "
                   "turn-level GAE (05)."),
    "2505.11821": ("", "", "concept-only",
                   "A reward-design recipe rather than an estimator: the lab's tool-use "
                   "environment exposes checkable turn rewards directly, and judge stand-ins live "
                   "in labkit.credit.judge."),
    "2511.20718": ("", "", "concept-only",
                   "An off-policy stabiliser for the optimiser; the lab's training loop is "
                   "on-policy, so there is nothing for it to correct."),
    "2508.00344": ("", "", "concept-only",
                   "A staged training schedule, not a per-trajectory credit rule that could be "
                   "scored against exact truth."),
    "2508.03680": ("", "", "concept-only",
                   "Training infrastructure (agent runtime decoupled from the trainer) with no "
                   "credit estimator of its own to implement."),
    "2601.03555": ("", "", "concept-only",
                   "Needs a curated library of tool-use skill templates and an LLM grader; "
                   "judge stand-ins are covered by labkit.credit.judge."),
    "2512.07478": ("", "", "concept-only",
                   "A reward-shaping schedule plus a prompt sampler: it changes what is rewarded "
                   "over time rather than how a fixed reward is split, so there is no truth to "
                   "score it against."),
    "2411.00809": ("", "", "concept-only",
                   "A segmentation rule for preference-alignment rewards; the lab's segment "
                   "estimators (SPO, TEMPO in notebook 04) use their own cut rules."),
    "2504.12961": ("", "", "concept-only",
                   "Needs an LLM to write the credit function; a hand-written one would miss the "
                   "point. Agent-level credit is taught with exact Shapley in notebook 09."),
    # ----- later additions: all concept-only for now -----
    "2510.00194": ("", "", "concept-only", LATER + "Nearest in the lab: the lambda dial of "
                   "labkit.credit.td.gae (notebook 02)."),
    "2605.21467": ("", "", "concept-only", LATER + "Nearest in the lab: the redistribution "
                   "estimators of notebook 07."),
    "2605.22074": ("", "", "concept-only", LATER + "Needs solutions decomposed into checkable "
                   "subproblems; nearest in the lab: process rewards in notebook 04."),
    "2606.32017": ("", "", "concept-only", LATER + "Needs a judge that labels action roles; "
                   "nearest in the lab: the judge stand-ins of notebook 07."),
    "2601.07408": ("", "", "concept-only", LATER + "Nearest in the lab: counterfactual credit "
                   "(notebook 08) and redistribution (notebook 07)."),
    "2606.29476": ("", "", "concept-only", LATER + "Needs a privileged-context teacher model; "
                   "nearest in the lab: labkit.credit.counterfactual.c3."),
    "2606.18810": ("", "", "concept-only", LATER + "Needs a model that can read its own solutions "
                   "in context; nearest in the lab: the privileged critics of notebook 08."),
    "2606.04889": ("", "", "concept-only", LATER + "Nearest in the lab: the redistribution "
                   "estimators of notebook 07."),
    "2605.10325": ("", "", "concept-only", LATER + "The lab's environments already expose "
                   "intermediate checks; nearest in the lab: process rewards in notebook 04."),
    "2606.12384": ("", "", "concept-only", LATER + "Nearest in the lab: forked-continuation "
                   "estimators labkit.credit.mc.vineppo and labkit.credit.mc.spo."),
    "2606.26790": ("", "", "concept-only", LATER + "Needs a model that writes hindsight skills; "
                   "nearest in the lab: the privileged critics of notebook 08."),
    "2605.11775": ("", "", "concept-only", LATER + "An entropy-control rule; nearest in the lab: "
                   "labkit.credit.entropy.carl."),
    "2606.26080": ("", "", "concept-only", LATER + "Nearest in the lab: "
                   "labkit.credit.implicit.dpo_implicit_q."),
    "2606.32034": ("", "", "concept-only", LATER + "An evaluation harness, not an estimator; its "
                   "idea (score dense signals against reference Q-values) is what notebook 10 "
                   "does with exact truth."),
    "2606.19236": ("", "", "concept-only", LATER + "An entropy-stability rule; nearest in the "
                   "lab: labkit.credit.entropy.carl."),
    "2605.25381": ("", "", "concept-only", LATER + "A schedule over training rather than a "
                   "per-trajectory credit rule, so there is no truth to score it against."),
    "2605.15155": ("", "", "concept-only", LATER + "Needs a privileged-context teacher model; "
                   "nearest in the lab: the privileged critics of notebook 08."),
    "2601.04767": ("", "", "concept-only", LATER + "Nearest in the lab: the rollout tree of "
                   "labkit.credit.mc.tempo."),
    "openreview-RY47Tq0VsV": ("", "", "concept-only", LATER + "Nearest in the lab: "
                              "labkit.credit.group.gigpo plus the environment's step checks."),
    "2605.00425": ("", "", "concept-only", LATER + "Nearest in the lab: "
                   "labkit.credit.entropy.carl."),
    "2605.02178": ("", "", "concept-only", LATER + "Mainly exploration control (truncating "
                   "thoughts, resampling turns) rather than a credit estimator."),
    "2605.02801": ("", "", "concept-only", LATER + "A survey and taxonomy of multi-agent RL with "
                   "no estimator of its own."),
    "2605.06200": ("", "", "concept-only", LATER + "Nearest in the lab: "
                   "labkit.credit.information.igpo."),
    "2605.08013": ("", "", "concept-only", LATER + "Needs shell commands with syntax trees; "
                   "nearest in the lab: labkit.credit.group.gigpo."),
    "2605.08061": ("", "", "concept-only", LATER + "Reward design with an LLM grader; nearest in "
                   "the lab: the judge stand-ins of notebook 07."),
    "2605.06920": ("", "", "concept-only", LATER + "Outside policy RL; its cooperative-game "
                   "allocation is related to the Shapley values of notebook 09."),
}

# ---------------------------------------------------------------------------------------------
# Background estimators (not counted among the survey's 47, not in the catalog).
# ---------------------------------------------------------------------------------------------
BASELINES: list[dict[str, str]] = [
    dict(name="REINFORCE", arxiv_id="", year="1992",
         reference="Williams 1992, Machine Learning 8:229-256",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="Every token of a trajectory is pushed up or down by the trajectory's whole "
                     "return; unbiased, but its variance grows with the number of decisions.",
         labkit_function="labkit.credit.episode.reinforce",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="REINFORCE with baseline", arxiv_id="", year="1992",
         reference="Williams 1992, Machine Learning 8:229-256",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="Subtracts a baseline such as the batch-mean return before scaling the "
                     "log-probability gradient, which lowers variance without changing the "
                     "expected gradient.",
         labkit_function="labkit.credit.episode.reinforce_baseline",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="RLOO", arxiv_id="2402.14740", year="2024",
         reference="Ahmadian et al. 2024 (Back to Basics); leave-one-out baseline of Kool et "
                   "al. 2019",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="For each of k samples of a prompt the baseline is the mean reward of the "
                     "other k-1 samples, so the baseline never depends on the sample it "
                     "corrects.",
         labkit_function="labkit.credit.episode.rloo",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="GRPO", arxiv_id="2402.03300", year="2024",
         reference="Shao et al. 2024 (DeepSeekMath)",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="Standardises each sample's reward within its prompt group (minus the group "
                     "mean, divided by the group standard deviation) and copies the result to "
                     "every token.",
         labkit_function="labkit.credit.episode.grpo",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="Dr. GRPO", arxiv_id="2503.20783", year="2025",
         reference="Liu et al. 2025 (Understanding R1-Zero-Like Training)",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="GRPO without the division by the group's standard deviation and without "
                     "per-response length averaging, removing its tilt toward easy prompts and "
                     "long wrong answers.",
         labkit_function="labkit.credit.episode.dr_grpo",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="REINFORCE++", arxiv_id="2501.03262", year="2025",
         reference="Hu 2025 (REINFORCE++)",
         setting="reasoning;agentic", granularity="episode", methodology_family="episode",
         description="Per-token returns (KL penalty folded into the reward) whitened over the "
                     "whole batch instead of per prompt group; the baseline variant subtracts "
                     "the group mean first.",
         labkit_function="labkit.credit.episode.reinforce_pp",
         notebook="01_reinforce_variance.ipynb", status="implemented", status_note=""),
    dict(name="GAE", arxiv_id="1506.02438", year="2015",
         reference="Schulman et al. 2015 (ICLR 2016)",
         setting="reasoning;agentic", granularity="token", methodology_family="td",
         description="An exponentially weighted sum of one-step TD errors of a learned value "
                     "function; lambda trades the critic's bias against Monte Carlo variance.",
         labkit_function="labkit.credit.td.gae", notebook="02_critics_gae.ipynb",
         status="implemented", status_note="Notebook 02: the lambda dial on the chain with a "
                                           "learned tabular critic, then a value head on the tiny LM "
                                           "(labkit.critics.LMCritic) scored against Monte Carlo truth."),
    dict(name="Math-Shepherd", arxiv_id="2312.08935", year="2023",
         reference="Wang et al. 2023 (ACL 2024)",
         setting="reasoning", granularity="step", methodology_family="mc",
         description="Labels each reasoning step by how often completions sampled from just after "
                     "it reach the correct answer, producing process-reward training data without "
                     "human annotation.",
         labkit_function="labkit.credit.mc.math_shepherd", notebook="04_process_rewards.ipynb",
         status="implemented", status_note="Hard and soft step labels from sampled completions "
                                           "(function and tests done; notebook 04 still to come)."),
    dict(name="HCA", arxiv_id="1912.02503", year="2019",
         reference="Harutyunyan et al. 2019 (NeurIPS)",
         setting="agentic", granularity="step", methodology_family="hindsight_counterfactual",
         description="Reweights each action by how much more likely it was given the outcome "
                     "that followed than the policy made it, so credit goes to the actions that "
                     "made the outcome more likely rather than to everything that preceded it.",
         labkit_function="labkit.credit.hindsight.hca", notebook="08_hindsight_counterfactual.ipynb",
         status="implemented", status_note="Return-conditioned form with a binary outcome; the "
                                           "hindsight distribution is exact from the DP or counted "
                                           "on past rollouts (both in notebook 08)."),
]


# ---------------------------------------------------------------------------------------------

def find_catalog(explicit: str | None) -> Path:
    options = ([Path(explicit)] if explicit else []) + (
        [Path(os.environ["LABKIT_SURVEY_CATALOG"])] if os.environ.get("LABKIT_SURVEY_CATALOG")
        else []) + list(CATALOG_CANDIDATES)
    for path in options:
        if path.is_file():
            return path
    raise SystemExit(f"survey_catalog.csv not found; tried {[str(p) for p in options]}")


def build_methods(catalog: pd.DataFrame) -> pd.DataFrame:
    ids = list(catalog["id"])
    expected = set(APPENDIX_B) | set(RECENT_NAMES)
    for label, table in (("DESCRIPTIONS", DESCRIPTIONS), ("LAB", LAB)):
        if set(table) != set(ids):
            raise SystemExit(f"{label} ids differ from the catalog: missing "
                             f"{sorted(set(ids) - set(table))}, extra {sorted(set(table) - set(ids))}")
    if expected != set(ids):
        raise SystemExit(f"name tables differ from the catalog: missing "
                         f"{sorted(set(ids) - expected)}, extra {sorted(expected - set(ids))}")
    rows = []
    for rec in catalog.to_dict("records"):
        cid = rec["id"]
        if cid in APPENDIX_B:
            if rec["collection"] != "survey_snapshot":
                raise SystemExit(f"{cid}: in Appendix B but collection is {rec['collection']}")
            num, name, t, s, gran, meth, bl, ev, bench = APPENDIX_B[cid]
            row = dict(survey_number=str(num), name=name, type=TYPE_LETTER[t],
                       setting=SETTING_LETTERS[s], granularity_label=gran, methodology=meth,
                       baseline_family=BL_LETTER[bl], evidence=EV_LETTER[ev], benchmarks=bench)
        else:
            if rec["collection"] != "recent_addition":
                raise SystemExit(f"{cid}: not in Appendix B but collection is "
                                 f"{rec['collection']}")
            row = dict(survey_number="", name=RECENT_NAMES[cid],
                       type=SCOPE_TO_TYPE.get(rec["scope"], "related"),
                       setting=CATALOG_SETTING[rec["setting"]],
                       granularity_label=rec["granularity"], methodology=rec["methodology"],
                       baseline_family="", evidence="", benchmarks="")
        fn, nb, status, note = LAB[cid]
        row.update(
            id=cid, title=rec["title"], year=str(rec["year"]), collection=rec["collection"],
            granularity=";".join(GRANULARITY_LABELS[row["granularity_label"]]),
            methodology_family=METHODOLOGY_TO_FAMILY[row["methodology"]],
            paper_url=rec["paper_url"], code_url=rec["code_url"],
            description=DESCRIPTIONS[cid], labkit_function=fn, notebook=nb, status=status,
            status_note=note)
        assert all(part in SETTINGS for part in row["setting"].split(";"))
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(METHOD_COLUMNS))
    df["_num"] = pd.to_numeric(df["survey_number"], errors="coerce")
    df["_pos"] = range(len(df))
    df = df.sort_values(["_num", "_pos"], na_position="last").drop(columns=["_num", "_pos"])
    return df.reset_index(drop=True)


def to_csv_text(df: pd.DataFrame) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", help="path to survey_catalog.csv")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the committed files differ")
    args = parser.parse_args(argv)
    catalog = pd.read_csv(find_catalog(args.catalog), dtype=str, keep_default_na=False)
    outputs = {
        OUT_METHODS: to_csv_text(build_methods(catalog)),
        OUT_BASELINES: to_csv_text(pd.DataFrame(BASELINES, columns=list(BASELINE_COLUMNS))),
    }
    if args.check:
        stale = [p for p, text in outputs.items()
                 if not p.is_file() or p.read_text(encoding="utf-8") != text]
        for p in stale:
            print(f"{p.relative_to(REPO)} is out of date; run scripts/build_methods_csv.py")
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
    load_methods(OUT_METHODS)      # validate what was written
    load_baselines(OUT_BASELINES)
    print(f"wrote {OUT_METHODS.relative_to(REPO)} and {OUT_BASELINES.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
