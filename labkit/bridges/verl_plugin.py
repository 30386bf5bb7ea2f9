"""verl plugin: importing this module registers labkit's bridged estimators with verl.

pyproject.toml declares it as an entry point in verl's ``verl.plugins`` group, and verl imports
every such entry point whenever ``import verl`` runs (its default, ``VERL_USE_EXTERNAL_PLUGINS=auto``):
in the trainer process and in every Ray worker. So once labkit is installed beside verl,
``algorithm.adv_estimator=labkit_grpo`` works in a verl config with no launcher script of one's own.
verl swallows a plugin's import error (it logs it at debug level); ``REGISTERED`` says what was
registered, and ``tests/bridges/test_bridges_verl_parity.py`` checks that a fresh ``import verl`` finds the names.
"""
from __future__ import annotations

from labkit.bridges.verl import register

# the names verl now knows ("labkit_grpo", ...); registering again elsewhere is harmless
REGISTERED = register()
