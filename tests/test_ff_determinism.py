"""An episode's trajectory depends only on its arguments (issue #29's acceptance).

For each of the four envs and random (scenario, action set, seed, actions)
draws, the episode is run (a) in a fresh process that runs nothing else
first, (b) in this process after a random sequence of episodes of all four
envs -- on fresh envs, and on the draw's own env instance, whose
fast-forward memory (``env.ff_memory``) is carried across its episodes --
and (c) with ``fast_forward=False``; all three must be bit-identical:
observations (their bytes), rewards, ends and every info value.  A
fast-forward may only skip a stretch whose outcome it can compute exactly
(docs/fast-forward.md), so neither what ran before in the process nor
whether the fast-forwards are on can change anything an env returns.

The draws of one env share one subprocess (a fresh process per draw would
cost a second of imports each).
"""

from __future__ import annotations

import base64
import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.envs.raid6_bench import Raid6BenchEnv
from kenv.envs.random_mix import RandomMixEnv

ENV_CLASSES = {"kenv/RandomMix-v2": RandomMixEnv, "kenv/HwrngWait-v2": HwrngWaitEnv,
               "kenv/Raid6Bench-v3": Raid6BenchEnv, "kenv/Kernel-v3": KernelEnv}
#: the hwrng waits an action set is drawn from (each kind, short and long sleeps)
WAITS = ("cpu_relax", "hwrng_yield", "hwrng_msleep(1000)", "hwrng_msleep(3)", "hwrng_msleep(20)",
         "usleep_range(50,60)", "usleep_range(100,200)", "usleep_range(500,700)", "usleep_range(3000,5000)")
#: step lengths of Kernel-v3 and RandomMix-v2 a draw picks from (shorter ones keep the detailed runs short)
STEP_MS = (5, 10, 20)
STEPS = 12
DRAWS_PER_ENV = 3


def _subset(rnd: random.Random, values) -> list:
    return rnd.sample(list(values), rnd.randint(1, min(4, len(values))))


def draw(rnd: random.Random, env_id: str) -> dict:
    """One draw: the env's constructor arguments (scenario, action set), the
    episode's seed, and the seeds of the actions it takes."""
    cls = ENV_CLASSES[env_id]
    scenario = {name: rnd.choice(values) for name, values in cls.VERSIONS[0].scenario_fields.items()}
    if "step_ms" in scenario:
        scenario["step_ms"] = rnd.choice(STEP_MS)
    deferrals = RandomMixEnv.DEFAULT_ACTIONS + RandomMixEnv.EXTENDED_ACTIONS
    raid6 = Raid6BenchEnv.DEFAULT_ACTIONS + Raid6BenchEnv.EXTENDED_ACTIONS
    if env_id == "kenv/RandomMix-v2":
        actions = _subset(rnd, deferrals)
    elif env_id == "kenv/HwrngWait-v2":
        actions = _subset(rnd, WAITS)
    elif env_id == "kenv/Raid6Bench-v3":
        actions = _subset(rnd, raid6)
    else:
        actions = {"deferral": _subset(rnd, deferrals), "wait": _subset(rnd, WAITS),
                   "raid6": _subset(rnd, raid6)}
    return {"env_id": env_id, "kwargs": {"scenario": scenario, "actions": actions},
            "seed": rnd.randrange(10**6), "action_seed": rnd.randrange(10**6)}


def episode(env, d: dict) -> list:
    """Everything ``env`` returns in the episode of draw ``d`` (at most STEPS
    steps, actions from the action space seeded with d's action seed): per
    reset and step the observation's bytes, reward, ends and repr of the info."""
    obs, info = env.reset(seed=d["seed"])
    env.action_space.seed(d["action_seed"])
    out = [(obs.tobytes(), repr(info))]
    for _ in range(STEPS):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        out.append((obs.tobytes(), reward, term, trunc, repr(info)))
        if term or trunc:
            break
    return out


def run_draw(d: dict, fast_forward: bool = True, env=None) -> list:
    if env is None:
        env = gym.make(d["env_id"], fast_forward=fast_forward, **d["kwargs"])
    try:
        return episode(env, d)
    finally:
        env.close()


def _draws() -> list[dict]:
    rnd = random.Random(29)
    return [draw(rnd, env_id) for env_id in ENV_CLASSES for _ in range(DRAWS_PER_ENV)]


def _first_difference(a: list, b: list) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            fields = ("obs", "reward", "terminated", "truncated", "info") if i else ("obs", "info")
            which = [f for f, u, v in zip(fields, x, y) if u != v]
            return f"step {i} ({', '.join(which)})"
    return f"length {len(a)} vs {len(b)}"


@pytest.fixture(scope="module")
def fresh_process() -> list[list]:
    """(a): every draw's episode, run in a fresh process that ran nothing before it
    but imports (one process per env: its draws run in it in order, each on a new env)."""
    out = []
    for env_id in ENV_CLASSES:
        draws = [d for d in _draws() if d["env_id"] == env_id]
        proc = subprocess.run([sys.executable, str(Path(__file__)), "--worker"], input=json.dumps(draws),
                              capture_output=True, text=True, timeout=300,
                              cwd=Path(__file__).resolve().parent.parent)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out += pickle.loads(base64.b64decode(proc.stdout))
    return out


@pytest.mark.slow
def test_episode_is_the_same_in_a_fresh_process_after_other_episodes_and_without_fast_forward(fresh_process):
    draws = _draws()
    rnd = random.Random(2929)
    # (b): a random sequence of episodes of all four envs first (fresh envs) ...
    for env_id in rnd.sample(list(ENV_CLASSES), len(ENV_CLASSES)) * 2:
        run_draw(draw(rnd, env_id))
    differ = []
    for i, (d, fresh) in enumerate(zip(draws, fresh_process)):
        # ... then the draw on its own env after two other episodes of it (its
        # fast-forward memory carried across them), and on a new env
        env = gym.make(d["env_id"], **d["kwargs"])
        for _ in range(2):
            episode(env, {**d, "seed": rnd.randrange(10**6), "action_seed": rnd.randrange(10**6)})
        after_own = run_draw(d, env=env)
        after_others = run_draw(d)
        # (c): every stretch simulated in detail
        detailed = run_draw(d, fast_forward=False)
        for name, got in (("after other episodes, own env", after_own),
                          ("after other episodes, new env", after_others), ("fast_forward=False", detailed)):
            if got != fresh:
                differ.append(f"draw {i} {d}: {name} differs from the fresh process at "
                              f"{_first_difference(fresh, got)}")
    assert not differ, "\n".join(differ)


def _worker() -> None:
    draws = json.loads(sys.stdin.read())
    out = [run_draw(d) for d in draws]
    sys.stdout.write(base64.b64encode(pickle.dumps(out)).decode())


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
