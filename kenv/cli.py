"""The ``kenv`` command.

    kenv experiment NAME [flags]   run one seed experiment (``kenv experiment -h``)
    kenv reproduce [--json]        every seed figure: simulated vs published
    kenv evaluate --env ID ...     baselines side by side, with 95% confidence intervals
    kenv bench [--json]            env step rates as ratios to CartPole-v1 (same run)
    kenv train --config ppo ...    train an SB3 agent (agents/train.py)
    kenv rediscover [--json]       train on every env; does the agent find the patch?
    kenv trace experiment|env ...  record a run as Perfetto JSON or ftrace text (``kenv trace -h``)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .errors import ConfigError


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def build_parser() -> argparse.ArgumentParser:
    from .experiments import add_experiment_parsers

    parser = argparse.ArgumentParser(prog="kenv", description="kenv: a simulated Linux kernel as a Gymnasium environment")
    sub = parser.add_subparsers(dest="command", required=True)

    exp = sub.add_parser("experiment", help="run one seed experiment")
    exp_sub = exp.add_subparsers(dest="experiment", required=True)

    def configure(p: argparse.ArgumentParser, name: str, mod) -> None:
        _add_common(p)
        p.set_defaults(_run=mod.run_from_args)

    add_experiment_parsers(exp_sub, configure)

    rep = sub.add_parser("reproduce", help="every published seed figure: simulated vs published")
    _add_common(rep)
    rep.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                     help="simulate every experiment in full detail (the same figures, much slower)")
    rep.set_defaults(_run=_reproduce)

    ev = sub.add_parser("evaluate", help="evaluate baseline policies on an environment")
    ev.add_argument("--env", required=True, help="environment id, e.g. kenv/Raid6Bench-v0")
    ev.add_argument("--policy", default="all",
                    help="original, pre_patch, patched, random, oracle, or all (default)")
    ev.add_argument("--episodes", type=int, default=20, help="episodes per policy (default 20)")
    ev.add_argument("--profile", default="balanced", help="reward profile: balanced, latency, throughput or a YAML path")
    _add_common(ev)
    ev.set_defaults(_run=_evaluate)

    b = sub.add_parser("bench", help="steps/s of each kenv env as a ratio to CartPole-v1 in the same run")
    b.add_argument("--steps", type=int, default=3000, help="steps per env (default 3000)")
    b.add_argument("--env", action="append", default=None, help="only this env id (repeatable)")
    b.add_argument("--warmup", type=int, default=None,
                   help="untimed steps of each env before it is timed (default 1000; 0: a fresh env)")
    _add_common(b)
    b.set_defaults(_run=_bench)

    tr = sub.add_parser("train", help="train an SB3 agent from an RL-Zoo-style YAML config (agents/train.py)")
    _train_module().add_arguments(tr)
    _add_common(tr)
    tr.set_defaults(_run=lambda a: _train_module().run_from_args(a))

    rd = sub.add_parser("rediscover", help="train on every env and check that the agent finds the patch")
    _rediscover_module().add_arguments(rd)
    rd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    rd.set_defaults(_run=lambda a: _rediscover_module().run_from_args(a))

    from .trace.cli import add_trace_parser
    add_trace_parser(sub, _add_common)
    return parser


def _reproduce(args: argparse.Namespace):
    from .experiments.reproduce import run_reproduce

    return run_reproduce(seed=args.seed, fast_forward=args.fast_forward)


def _evaluate(args: argparse.Namespace):
    from agents.evaluate import evaluate

    return evaluate(args.env, args.policy, episodes=args.episodes, seed=args.seed, profile=args.profile)


def _bench(args: argparse.Namespace):
    from .envs.bench import run_bench

    if args.steps < 1:
        raise ConfigError("steps", args.steps, "an integer >= 1")
    warmup = {} if args.warmup is None else {"warmup": args.warmup}   # (None: run_bench's default)
    return run_bench(steps=args.steps, env_ids=args.env, seed=args.seed, **warmup)


def _train_module():
    from agents import train

    return train


def _rediscover_module():
    from agents import rediscover

    return rediscover


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args._run(args)
    except ConfigError as e:
        parser.exit(2, f"kenv: error: {e}\n")
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(result.format_text().rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
