"""``kenv bench``: single-env step rates of the kenv envs next to CartPole-v1, in one run.

Machines here are noisy (2 cores, shared), so the figure that means something
is the ratio to Gymnasium's CartPole-v1 measured in the same process, next to
each kenv env.  Each env is made with ``gym.make`` and its default arguments
(so the wrappers Gymnasium adds are counted for both), stepped with uniformly
random actions drawn inside the timed loop, and reset when an episode ends;
resets count in the time.  That is the loop of Gymnasium's own
``gymnasium.utils.performance.benchmark_step``.

The two are measured in ``rounds`` alternating chunks (CartPole, the env,
CartPole, the env, ...; each env goes on where its last chunk stopped), and
the ratio reported (``ratio_to_cartpole``, the text's ``x CartPole``) is the
median of the chunks' ratios: a burst of load from elsewhere on the machine then
spoils one chunk's ratio instead of the figure.  ``steps_per_s`` is the median of
the env's chunks, ``cartpole_steps_per_s`` the median of all CartPole chunks, and
``rate_ratio_to_cartpole`` is the plain ratio of those two
(``steps_per_s / cartpole_steps_per_s``), which can differ from the median of
the ratios.

Before its timed chunks each env takes ``warmup`` untimed steps (CartPole is
warmed up too).  The figure is then the rate a training run sees: qperf's
fast-forward learns the steady round trips and mix triggers of a machine in the
first several hundred steps of a process and keeps them for every later episode
(the rng's fast-forward keeps its wait cycles the same way), so a fresh process's
first steps do more work (seed 0: RandomMix-v2's first 750 execute about a fifth
more bytecodes per step than its later ones, Kernel-v3's first 250 about a fifth
more).  ``warmup=0`` measures from a fresh env.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import gymnasium as gym

from ..schema import check_int
from .registration import BENCHMARK_IDS, check_env_id

#: alternating chunks per env (see the module doc)
ROUNDS = 5
#: untimed steps of each env before its chunks (see the module doc)
WARMUP = 1000


class _Stepper:
    """One env, stepped with random actions in timed chunks that go on from each other."""

    def __init__(self, env_id: str, seed: int, wrapper=None, **kwargs):
        """``wrapper``: applied to the made env (run_bench's ``wrapper``)."""
        env = gym.make(env_id, **kwargs)
        self.env = env if wrapper is None else wrapper(env)
        self.env.action_space.seed(seed)
        self.env.reset(seed=seed)
        self.seed = seed
        self.done_steps = 0

    def chunk(self, steps: int) -> tuple[float, float]:
        """(steps/s, simulated seconds per step; 0 for non-kenv envs) of the next ``steps``."""
        env = self.env
        sim_s = 0.0
        t0 = time.perf_counter()
        for _ in range(steps):
            _, _, term, trunc, info = env.step(env.action_space.sample())
            sim_s += info.get("step_sim_s", 0.0) if isinstance(info, dict) else 0.0
            self.done_steps += 1
            if term or trunc:
                self.next_episode()
        dt = time.perf_counter() - t0
        return steps / dt, sim_s / steps

    def next_episode(self) -> None:
        """Reset at an episode's end, with the seed bench gives the episode that starts after ``done_steps``."""
        self.env.reset(seed=self.seed + self.done_steps)

    def close(self) -> None:
        self.env.close()


def steps_per_second(env_id: str, steps: int, seed: int = 0, **kwargs) -> tuple[float, float]:
    """(steps/s, simulated seconds per step; 0 for non-kenv envs) over ``steps`` steps."""
    s = _Stepper(env_id, seed, **kwargs)
    try:
        return s.chunk(steps)
    finally:
        s.close()


@dataclass
class BenchResult:
    cartpole_steps_per_s: float
    envs: list[dict] = field(default_factory=list)
    warmup_steps: int = 0

    def to_dict(self) -> dict:
        return {"cartpole_steps_per_s": self.cartpole_steps_per_s, "envs": self.envs,
                "warmup_steps": self.warmup_steps}

    def format_text(self) -> str:
        lines = [f"CartPole-v1: {self.cartpole_steps_per_s:,.0f} steps/s (reference, same run); "
                 f"each env timed after {self.warmup_steps:,} untimed steps",
                 f"{'env':<28} {'steps/s':>10} {'x CartPole':>11} {'sim s/step':>11}"]
        for e in self.envs:
            lines.append(f"{e['id']:<28} {e['steps_per_s']:>10,.0f} {e['ratio_to_cartpole']:>11.3f} "
                         f"{e['sim_s_per_step']:>11.4f}")
        lines += ["x CartPole: the median over the alternating chunks of env steps/s / CartPole-v1 steps/s",
                  "in the chunk beside it (--json: ratio_to_cartpole; rate_ratio_to_cartpole is the plain",
                  "steps_per_s / cartpole_steps_per_s)"]
        return "\n".join(lines)


def run_bench(steps: int = 3000, env_ids: list[str] | None = None, seed: int = 0,
              rounds: int = ROUNDS, warmup: int = WARMUP, wrapper=None) -> BenchResult:
    """``steps`` steps of each env (and 5x as many of CartPole next to it), in
    ``rounds`` alternating chunks, after ``warmup`` untimed ones; see the module
    doc.  ``wrapper``: applied to each kenv env (benchmarks/kernel_decisions.py)."""
    import kenv  # noqa: F401

    check_int(steps, "steps", 1)
    check_int(rounds, "rounds", 1)
    check_int(warmup, "warmup", 0)
    rounds = min(rounds, steps)   # every chunk at least one step
    for env_id in env_ids or ():
        check_env_id(env_id)
    ids = env_ids or list(BENCHMARK_IDS)
    # warm-up (imports, first-call costs)
    steps_per_second("CartPole-v1", 200, seed)
    all_ref = []
    out = BenchResult(0.0, warmup_steps=warmup)
    for env_id in ids:
        ref_env, env = _Stepper("CartPole-v1", seed), _Stepper(env_id, seed, wrapper=wrapper)
        if warmup:
            ref_env.chunk(warmup)
            env.chunk(warmup)
        ratios, rates, sim_total = [], [], 0.0
        for r in range(rounds):
            n = steps // rounds + (r < steps % rounds)
            ref, _ = ref_env.chunk(5 * n)
            rate, sim = env.chunk(n)
            all_ref.append(ref)
            ratios.append(rate / ref)
            rates.append(rate)
            sim_total += sim * n
        ref_env.close()
        env.close()
        out.envs.append({"id": env_id, "steps_per_s": statistics.median(rates),
                         "ratio_to_cartpole": statistics.median(ratios), "sim_s_per_step": sim_total / steps})
    out.cartpole_steps_per_s = statistics.median(all_ref)
    for e in out.envs:
        e["rate_ratio_to_cartpole"] = e["steps_per_s"] / out.cartpole_steps_per_s
    return out
