"""Packaged configuration: reward profiles (reward/), scenario mixes (scenarios/), training hyperparameters (train/).

This directory is the single source of these YAML files; it ships inside the package as
``kenv.configs`` (see pyproject.toml), so gym.make() finds the defaults after a plain install.
"""
