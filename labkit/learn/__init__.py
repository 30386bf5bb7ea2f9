"""Learning: the policy-gradient loop and its losses (``loop``), every learned critic
(``critics``) and every judge stand-in (``judges``). Sits above ``labkit.credit``: estimators take
critics and judges as explicit arguments and never import this package."""
