"""Credit estimators, one module per methodology family, all with the signature
``fn(rollouts, **options) -> Credit`` and registered by name with their spec
(``labkit.credit.registry``: ``spec(name)``, ``specs()``)."""
from labkit.credit.registry import ESTIMATORS, estimate, get_estimator, register, spec, specs
from labkit.credit import episode, mc, td  # noqa: F401  (importing registers the estimators)
from labkit.credit import token_baseline  # noqa: F401
from labkit.credit import entropy, group, information  # noqa: F401  (turn-level agent estimators)
from labkit.credit import counterfactual, hindsight, privileged  # noqa: F401
from labkit.credit import judge, multiagent  # noqa: F401
from labkit.credit import implicit, process, redistribution  # noqa: F401  (notebook 04's families)
from labkit.credit import traces  # noqa: F401  (GRPO-lambda, RUDDER, Progress Advantage, SC-GRPO)
from labkit.credit import search_trees  # noqa: F401  (Monte Carlo forks, trees and process labels)
from labkit.credit import token_weights  # noqa: F401  (token reweighting of an outcome advantage)
from labkit.credit import temporal  # noqa: F401  (scheduled token selection)
from labkit.credit import entropy_modulation  # noqa: F401  (EMPG, AEM, T2PO: entropy-modulated turn credit)
from labkit.credit import self_distillation  # noqa: F401  (SDAR, CRAFT, OPID: teacher-student gaps)
from labkit.credit import structured_actions  # noqa: F401  (A3: structured action residuals and branch margins)
from labkit.credit import role_judges  # noqa: F401  (TRIAGE, Rubric-Grounded RL: judged roles and rubric items)
from labkit.credit import checked_turns  # noqa: F401  (VPR, GVPO: turns checked by a program or by execution feedback)
from labkit.credit import turn_trees  # noqa: F401  (AT2PO, Tree-GRPO: trees of turns grown by re-execution)

__all__ = ["ESTIMATORS", "estimate", "get_estimator", "register", "spec", "specs", "episode", "token_baseline", "mc", "td",
           "group", "entropy", "information", "multiagent", "judge",
           "hindsight", "counterfactual", "privileged", "implicit", "process", "redistribution", "traces",
           "search_trees", "token_weights", "temporal",
           "entropy_modulation", "self_distillation", "structured_actions", "role_judges", "checked_turns", "turn_trees"]
