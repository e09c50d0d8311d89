"""Entropy at boot in kenv/KernelBoot-v0: time to crng READY and the entropy component, per policy.

    PYTHONPATH=. python benchmarks/boot_entropy.py [--episodes 20] [--seed 0] [--profile balanced]

Every policy plays the episodes ``kenv evaluate`` plays (episode i resets with
seed ``seed + i``) on KernelBoot-v0's default mix (every episode starts at boot,
before crng READY).  Printed per policy: the return and the episode's entropy
component (mean and 95% interval, Student t, as ``kenv evaluate``); the time
from the episode's start to crng READY (an episode that ends before READY is
run on, with its last action, until READY or ``--ready-cap-s``); and how many
episodes reached READY before modprobe exited.  ``original`` runs with the
deferral set extended by ``hardirq`` (its choice).  Then, per scenario context,
the best static action (the oracle's search) against the patched one.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import kenv  # noqa: F401  (registers the envs)
from kenv.agents.baselines import action_label, build_oracle, make_policy
from kenv.agents.evaluate import ci95
from kenv.sim.engine import NSEC_PER_SEC

ENV_ID = "kenv/KernelBoot-v0"
POLICIES = ("original", "pre_patch", "patched", "random")


def ready_after(env, action, t0_ns: int, cap_s: float) -> tuple[float, bool]:
    """Seconds from the episode's start (``t0_ns``) to crng READY, running the
    episode's simulation on with ``action`` past its end (up to ``cap_s``), and
    whether READY came before the episode ended."""
    u = env.unwrapped
    ep = u._episode
    in_episode = ep.pool.ready_ns is not None
    while ep.pool.ready_ns is None and ep.k.now - t0_ns < cap_s * NSEC_PER_SEC:
        ep.step(u.codec.kernel_action(u.codec.index(action)))
    if ep.pool.ready_ns is None:
        return float("inf"), False
    return (ep.pool.ready_ns - t0_ns) / NSEC_PER_SEC, in_episode


def run(policy_name: str, episodes: int, seed: int, profile: str, cap_s: float) -> dict:
    actions = {"deferral": ["workqueue", "timer", "hardirq"]} if policy_name == "original" else None
    env = gym.make(ENV_ID, profile=profile, actions=actions)
    pol = make_policy(policy_name, env, seed=seed)
    rets, ents, readies, within = [], [], [], 0
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        t0_ns = round(info["sim_time_s"] * NSEC_PER_SEC)
        pol.reset(env, obs, info)
        total, ent = 0.0, 0.0
        while True:
            a = pol.act(obs, info)
            obs, r, term, trunc, info = env.step(a)
            total += r
            ent += info["reward_components"]["entropy"]
            if term or trunc:
                break
        t, inside = ready_after(env, a, t0_ns, cap_s)
        rets.append(total)
        ents.append(ent)
        readies.append(t)
        within += inside
    finite = [t for t in readies if np.isfinite(t)]
    return {"policy": policy_name, "return": (float(np.mean(rets)), ci95(rets)),
            "entropy": (float(np.mean(ents)), ci95(ents)),
            "ready_s": (float(np.mean(finite)) if finite else float("nan"), ci95(finite),
                        float(min(finite, default=float("nan"))), float(max(finite, default=float("nan")))),
            "never_ready": len(readies) - len(finite), "ready_in_episode": within, "episodes": episodes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", default="balanced")
    ap.add_argument("--ready-cap-s", type=float, default=5.0)
    args = ap.parse_args()
    if args.episodes < 1:
        ap.error(f"--episodes: got {args.episodes}; allowed: an integer >= 1")
    if not args.ready_cap_s > 0:
        ap.error(f"--ready-cap-s: got {args.ready_cap_s}; allowed: seconds > 0")
    print(f"{ENV_ID} profile={args.profile} episodes={args.episodes} seed={args.seed} (± : 95% interval)")
    print(f"{'policy':<10} {'return':>17} {'entropy':>15} {'to READY s (mean ± ci, min..max)':>36}  READY in episode")
    for name in POLICIES:
        r = run(name, args.episodes, args.seed, args.profile, args.ready_cap_s)
        (rm, rc), (em, ec), (tm, tc, tmin, tmax) = r["return"], r["entropy"], r["ready_s"]
        never = f", never within {args.ready_cap_s:g} s: {r['never_ready']}" if r["never_ready"] else ""
        print(f"{name:<10} {rm:>9.3f} ± {rc:<5.3f} {em:>7.3f} ± {ec:<5.3f} {tm:>10.3f} ± {tc:<5.3f} "
              f"({tmin:.3f}..{tmax:.3f})  {r['ready_in_episode']}/{r['episodes']}{never}")
    env = gym.make(ENV_ID, profile=args.profile)
    oracle = build_oracle(env)
    patched = action_label(env, env.unwrapped.action_for(env.unwrapped.PATCHED))
    print(f"\nbest static action per context (oracle, 3 episodes each) vs patched ({patched}):")
    for key, by_action in oracle.returns.items():
        means = {a: float(np.mean(v)) for a, v in by_action.items()}
        best = max(means, key=means.get)
        ctx = ", ".join(f"{f}={v}" for f, v in key)
        ties = sorted(a for a, m in means.items() if m == means[best])
        verdict = ("patched best" if ties == [patched] else f"patched ties with {', '.join(t for t in ties if t != patched)}"
                   if patched in ties else f"{best} wins by {means[best] - means[patched]:.3f}")
        print(f"  {ctx}: patched {means[patched]:.3f}, {verdict}")


if __name__ == "__main__":
    main()
