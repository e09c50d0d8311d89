"""``kenv bench``: single-env step rates of the kenv envs next to CartPole-v1, in one run.

Machines here are noisy (2 cores, shared), so the figure that means something
is the ratio to Gymnasium's CartPole-v1 measured in the same process, just
before each kenv env.  Each env is made with ``gym.make`` and its default
arguments (so the wrappers Gymnasium adds are counted for both), stepped with
uniformly random actions, and reset when an episode ends; resets count in
the time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import gymnasium as gym

from .registration import ENVS


def steps_per_second(env_id: str, steps: int, seed: int = 0, **kwargs) -> tuple[float, float]:
    """(steps/s, simulated seconds per step; 0 for non-kenv envs)."""
    env = gym.make(env_id, **kwargs)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    sim_s = 0.0
    t0 = time.perf_counter()
    for i in range(steps):
        _, _, term, trunc, info = env.step(env.action_space.sample())
        sim_s += info.get("step_sim_s", 0.0) if isinstance(info, dict) else 0.0
        if term or trunc:
            env.reset(seed=seed + i + 1)
    dt = time.perf_counter() - t0
    env.close()
    return steps / dt, sim_s / steps


@dataclass
class BenchResult:
    cartpole_steps_per_s: float
    envs: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"cartpole_steps_per_s": self.cartpole_steps_per_s, "envs": self.envs}

    def format_text(self) -> str:
        lines = [f"CartPole-v1: {self.cartpole_steps_per_s:,.0f} steps/s (reference, same run)",
                 f"{'env':<22} {'steps/s':>10} {'x CartPole':>11} {'sim s/step':>11}"]
        for e in self.envs:
            lines.append(f"{e['id']:<22} {e['steps_per_s']:>10,.0f} {e['ratio_to_cartpole']:>11.3f} "
                         f"{e['sim_s_per_step']:>11.4f}")
        return "\n".join(lines)


def run_bench(steps: int = 3000, env_ids: list[str] | None = None, seed: int = 0) -> BenchResult:
    import kenv  # noqa: F401

    ids = env_ids or [e[0] for e in ENVS]
    # warm-up (imports, first-call costs)
    steps_per_second("CartPole-v1", 200, seed)
    ref_rates = []
    out = BenchResult(0.0)
    for env_id in ids:
        ref, _ = steps_per_second("CartPole-v1", steps * 5, seed)
        ref_rates.append(ref)
        rate, sim = steps_per_second(env_id, steps, seed)
        out.envs.append({"id": env_id, "steps_per_s": rate, "ratio_to_cartpole": rate / ref,
                         "sim_s_per_step": sim})
    out.cartpole_steps_per_s = sum(ref_rates) / len(ref_rates)
    return out
