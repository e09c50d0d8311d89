"""Agents for kenv, installed as ``kenv.agents`` (the folder agents/ of the repository): fixed baselines,
evaluation, SB3 training along RL Zoo's seams, and ``kenv rediscover`` (outside the simulator core)."""
