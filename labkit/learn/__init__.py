"""Learning: the policy-gradient loop and its losses (``loop``), every learned critic
(``critics``) and every judge stand-in (``judges``), and the training runs notebooks and scripts
share (``lm_runs``: RL on the tiny LM; ``echo_trap``: notebook 05's runs). Sits above
``labkit.credit``: estimators take critics and judges as explicit arguments and never import
this package."""
