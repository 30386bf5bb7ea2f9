"""Bridges: labkit's estimators inside other training engines (the top of the stack, beside the course).

``labkit.bridges.verl`` exposes labkit estimators with verl's advantage-estimator signature;
``labkit.bridges.trl`` gives TRL's ``GRPOTrainer`` a labkit estimator's per-token advantages. The
engines themselves are optional extras (``pip install labkit[verl]``, ``pip install trl``): labkit
imports without them, and a bridge imports its engine only when it is used.
"""
