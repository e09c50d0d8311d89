"""Agents for kenv: fixed baselines, evaluation, SB3 training (outside the simulator core)."""
