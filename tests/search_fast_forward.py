"""Search for env runs that a fast-forward changes: random scenarios, actions and seeds.

    python tests/search_fast_forward.py [--ff hwrng|qperf ...] [--env ID ...] [--minutes 5] [--draws N] [--seed 0]
                                        [--irq-threads] [--phases]

A fast-forward (kenv.fastforward.hwrng: the rng's wait cycles and spinning
reads; kenv.fastforward.qperf: steady round trips) may only change how many
engine events a run takes.  The tests check that on a few fixed scenarios.
This draws many: each draw picks a value of every scenario field the env
allows (its base version's ``scenario_fields``), an action set (hwrng waits, mix deferrals) and
two episode seeds, runs those episodes under random actions with the
fast-forwards on and then off (``gym.make(..., fast_forward=False)``), and
compares everything an env returns (observations, rewards, ends, info but
``step_sim_s``).  The draws share one fast-forward memory
(:class:`~kenv.envs.base.FastForwardMemory`, given to each new env with the
fast-forwards on), so what the fast-forwards learn in one draw serves the
next ones, as in any long run.  A draw that differs is printed with its number and the
arguments that replay it alone (``--replay``); the exit status is then 1.
One that differs only after what earlier draws taught the fast-forwards
replays with the same ``--seed`` (and ``--ff``, ``--env``) and ``--draws``
its number.  ``--irq-threads``: every draw of an env that offers
``irq_threads=True`` (PREEMPT_RT's interrupt threads, kenv.kernel.irq) passes
it, with ``preempt`` "rt" in half of them.  ``--phases``: every draw passes
``phases=True`` (Kernel: with ``boot_states=True``, which it needs) and draws
the phase fields too (the workloads that change within an episode, as in
the Phased ids).  Any difference counts: a fast-forward may only skip what it
computes exactly (docs/fast-forward.md).

Not collected by pytest (its name does not start with ``test_``): a search
takes minutes.  The cases it has found are pinned in tests/test_hwrng_ff.py and
tests/test_random.py.
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
import time

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.base import FastForwardMemory
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.envs.random_mix import RandomMixEnv

#: per fast-forward: the envs that run it (a draw for it picks from its action
#: set: hwrng waits, mix deferrals; ``fast_forward=False`` turns all of an env's off)
FAST_FORWARDS = {
    "hwrng": ("kenv/HwrngWait-v2", "kenv/Kernel-v3"),
    "qperf": ("kenv/RandomMix-v2", "kenv/Kernel-v3"),
}
ENV_CLASSES = {"kenv/HwrngWait-v2": HwrngWaitEnv, "kenv/Kernel-v3": KernelEnv, "kenv/RandomMix-v2": RandomMixEnv}
#: the hwrng waits a draw's action set is taken from
WAITS = ("cpu_relax", "hwrng_yield", "hwrng_msleep(1000)", "hwrng_msleep(3)", "hwrng_msleep(20)",
         "usleep_range(50,60)", "usleep_range(100,200)", "usleep_range(500,700)", "usleep_range(3000,5000)")
STEPS = 24
#: step lengths of Kernel-v3 and RandomMix-v2 a draw picks from (the longer ones make slow detailed runs)
STEP_MS = (5, 10, 20)


def draw(rnd: random.Random, ff: str, env_id: str, irq_threads: bool = False,
         phases: bool = False) -> tuple[dict, list[int]]:
    """The constructor arguments and the two episode seeds of one draw."""
    kwargs: dict = {}
    fields = ENV_CLASSES[env_id].VERSIONS[0].scenario_fields
    if phases:
        kwargs = {"phases": True, **({"boot_states": True} if env_id == "kenv/Kernel-v3" else {})}
        fields = ENV_CLASSES[env_id](**kwargs).version.scenario_fields   # with the phase fields
    scenario = {name: rnd.choice(values) for name, values in fields.items()}
    if "step_ms" in scenario:
        scenario["step_ms"] = rnd.choice(STEP_MS)
    kwargs["scenario"] = scenario
    if irq_threads and "irq_threads" in ENV_CLASSES[env_id].KERNEL_OPTIONS:
        kwargs["irq_threads"] = True
        if rnd.random() < 0.5:
            scenario["preempt"] = "rt"
    if ff == "hwrng":
        waits = rnd.sample(WAITS, rnd.randint(2, 4))
        kwargs["actions"] = waits if env_id == "kenv/HwrngWait-v2" else {"wait": waits}
    elif env_id == "kenv/RandomMix-v2":
        kwargs["actions"] = rnd.choice([None, list(RandomMixEnv.DEFAULT_ACTIONS + RandomMixEnv.EXTENDED_ACTIONS)])
    return kwargs, [rnd.randrange(10**6) for _ in range(2)]


def record_episodes(env, seeds, steps: int, before_episode=None, after_episode=None) -> list:
    """What ``env`` showed under uniformly random actions, one episode per seed
    (the action space seeded with it too) of at most ``steps`` steps: per reset
    and step, labelled (episode, step; 0 the reset), the observation's bytes,
    and reward, ends and info but ``step_sim_s``.  ``before_episode()`` and
    ``after_episode(env)`` run around each episode.  (The tests compare these
    too.)"""
    out = []
    for e, seed in enumerate(seeds):
        if before_episode is not None:
            before_episode()
        obs, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        out.append(((e, 0), obs.tobytes(), repr(sorted(info.items()))))
        for step in range(1, steps + 1):
            obs, reward, term, trunc, info = env.step(env.action_space.sample())
            info = {k: v for k, v in info.items() if k != "step_sim_s"}
            out.append(((e, step), obs.tobytes(), reward, term, trunc, repr(sorted(info.items()))))
            if term or trunc:
                break
        if after_episode is not None:
            after_episode(env)
    return out


def hwrng_fast_forward(env):
    """The hwrng fast-forward of ``env``'s episode, or None (no rng, or not probed yet)."""
    hw = getattr(env.unwrapped._episode, "hw", None)
    core = hw.core if hw is not None else None
    return core.rng.ff if core is not None else None


def trajectory(env_id: str, kwargs: dict, seeds: list[int], on: bool,
               memory: FastForwardMemory | None = None) -> list:
    """What the episodes showed with the env's fast-forwards ``on`` (with
    ``memory``, if given: what earlier draws learned) or off."""
    env = gym.make(env_id, fast_forward=on, **kwargs)
    if on and memory is not None:
        env.unwrapped.ff_memory = memory
    try:
        return record_episodes(env, seeds, STEPS)
    finally:
        env.close()


def compare(ff: str, env_id: str, kwargs: dict, seeds: list[int], memory: FastForwardMemory | None = None) -> str:
    """'same' or 'DIFFERS in episode E at step N' (0: the reset) for one draw
    (``ff``: the fast-forward it was drawn for; ``memory``: what the
    fast-forwards start with, None: nothing learned)."""
    fast = trajectory(env_id, kwargs, seeds, True, memory)
    exact = trajectory(env_id, kwargs, seeds, False)
    if fast == exact:
        return "same"
    first = next((a for a, b in zip(fast, exact) if a != b), None)
    e, step = first[0] if first is not None else (len(seeds) - 1, "end (one run has more steps)")
    return f"DIFFERS in episode {e} at step {step}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ff", action="append", choices=sorted(FAST_FORWARDS),
                    help="the fast-forward(s) to search (default: both)")
    ap.add_argument("--env", action="append", help="only these envs (default: every env that runs the fast-forward)")
    ap.add_argument("--minutes", type=float, help="how long to search (default 5, or no limit with --draws)")
    ap.add_argument("--draws", type=int, help="stop after this many draws")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    ap.add_argument("--irq-threads", action="store_true",
                    help="pass irq_threads=True to the envs that offer it (preempt rt in half the draws)")
    ap.add_argument("--phases", action="store_true",
                    help="pass phases=True (Kernel: with boot_states=True) and draw the phase fields too")
    ap.add_argument("--replay", nargs=4, metavar=("FF", "ENV", "KWARGS", "SEEDS"),
                    help="run one printed draw again instead of searching")
    args = ap.parse_args(argv)
    if args.replay:
        ff, env_id, kwargs, seeds = args.replay
        if ff not in FAST_FORWARDS:
            ap.error(f"--replay FF: unknown fast-forward {ff!r}; allowed: {', '.join(sorted(FAST_FORWARDS))}")
        if env_id not in FAST_FORWARDS[ff]:
            ap.error(f"--replay ENV: {env_id!r} does not run the {ff} fast-forward; "
                     f"allowed: {', '.join(FAST_FORWARDS[ff])}")
        literals = []
        for name, text, kind in (("KWARGS", kwargs, dict), ("SEEDS", seeds, list)):
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = None
            if not isinstance(value, kind):
                ap.error(f"--replay {name}: {text!r} is not a Python {kind.__name__} literal, as a search prints it")
            literals.append(value)
        verdict = compare(ff, env_id, *literals)
        print(verdict)
        return 1 if verdict.startswith("DIFFERS") else 0
    if args.minutes is not None and args.minutes <= 0:
        ap.error(f"--minutes must be > 0, got {args.minutes}")
    if args.draws is not None and args.draws <= 0:
        ap.error(f"--draws must be >= 1, got {args.draws}")
    minutes = args.minutes if args.minutes is not None else 5.0 if args.draws is None else float("inf")
    pairs = [(ff, env_id) for ff in (args.ff or sorted(FAST_FORWARDS)) for env_id in FAST_FORWARDS[ff]
             if not args.env or env_id in args.env]
    if not pairs:
        allowed = sorted({e for envs in FAST_FORWARDS.values() for e in envs})
        ap.error(f"--env: none of {args.env} runs the chosen fast-forward(s); allowed: {', '.join(allowed)}")
    rnd = random.Random(args.seed)
    end = time.monotonic() + 60 * minutes
    counts: dict[str, int] = {}
    memory = FastForwardMemory()   # what the draws' fast-forwards learned
    n = 0
    while time.monotonic() < end and (args.draws is None or n < args.draws):
        n += 1
        ff, env_id = rnd.choice(pairs)
        kwargs, seeds = draw(rnd, ff, env_id, args.irq_threads, args.phases)
        verdict = compare(ff, env_id, kwargs, seeds, memory)
        counts[verdict[:7]] = counts.get(verdict[:7], 0) + 1
        if verdict != "same":
            print(f"draw {n}: {verdict}: --replay {ff} {env_id} \"{kwargs!r}\" \"{seeds!r}\"", flush=True)
    print(f"{n} draws: " + ", ".join(f"{c} {v}" for v, c in sorted(counts.items())))
    return 1 if counts.get("DIFFERS") else 0


if __name__ == "__main__":
    sys.exit(main())
