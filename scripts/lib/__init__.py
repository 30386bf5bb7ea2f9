"""Modules the scripts import, kept apart from them: nothing here is run on its own.

A script imports them as ``from lib.<module> import ...`` (Python puts the running script's
folder, scripts/, first on its path).
"""
