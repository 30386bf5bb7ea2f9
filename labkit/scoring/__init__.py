"""Scoring estimated credit against exact truth (imports ``labkit.core`` only).

* ``agreement``: does the credit point at the right positions? Error, rank correlation, sign
  agreement and recall@k against the exact advantage; Pearson and cosine.
* ``gradient``: does it produce the right update? Its policy-gradient estimate against the
  exact gradient, batch by batch (cosine, variance).
* ``ranking``: does a value estimate order a state's alternative next steps as the truth does?
* ``steps``: step-level credit on rollouts with a known first wrong step (hit rate, step rank
  correlation, the wrong step's positions).
* ``intervals``: how far a measured rate could move (Wilson; paired bootstrap for a difference;
  bootstrap for a mean over independent runs, and for the difference of two such means).
* ``luck``: skill against luck (the share of outcome spread that is luck; the one least-squares
  fit of credit on skill and luck).
"""
from labkit.scoring.agreement import (advantage_error, cosine, pearson, rank_correlation, recall_at_k, score_credit,
                                      sign_agreement)
from labkit.scoring.gradient import gradient_study, logit_view
from labkit.scoring.intervals import (difference_interval, hit_rate_intervals, mean_interval, paired_difference,
                                      wilson_interval)
from labkit.scoring.luck import (information_luck_regression, information_luck_share, luck_after, luck_per_skill,
                                 luck_regression, luck_share, luck_terms, skill_luck_fit)
from labkit.scoring.ranking import ranking_accuracy
from labkit.scoring.steps import first_error_hit_rate, first_error_hits, first_error_positions, step_rank_correlation

__all__ = ["advantage_error", "cosine", "pearson", "rank_correlation", "recall_at_k", "score_credit",
           "sign_agreement", "gradient_study", "logit_view", "ranking_accuracy", "first_error_hit_rate", "first_error_hits",
           "first_error_positions", "step_rank_correlation", "wilson_interval", "hit_rate_intervals", "difference_interval", "mean_interval",
           "paired_difference", "luck_after", "luck_share", "skill_luck_fit", "luck_per_skill", "luck_terms",
           "luck_regression", "information_luck_share", "information_luck_regression"]
