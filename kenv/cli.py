"""The ``kenv`` command.

    kenv experiment NAME [flags]   run one seed experiment (``kenv experiment -h``)
    kenv reproduce [--json]        every seed figure: simulated vs published
    kenv evaluate --env ID ...     baselines (and --model PATH.zip) side by side, with 95% confidence intervals
    kenv validate PATH [--strict] [--json]
                                   replay episode records; exit 1 on any mismatch
    kenv bench [--json]            env step rates as ratios to CartPole-v1 (same run)
    kenv train --config ppo ...    train an SB3 agent (agents/train.py)
    kenv rediscover [--json]       train on every env; does the agent find the patch?
    kenv benchmark [--json]        PPO, A2C, DQN on every id over seeds: the results table
    kenv discover --env ID ...     extended actions: patch vs best static vs learned, and the rule learned
    kenv trace experiment|env ...  record a run as Perfetto JSON or ftrace text (``kenv trace -h``)
    kenv --version                 the installed kenv-gym's version
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Callable, Sequence

from .errors import ConfigError, JobError
from .files import FileError
from .envs.registration import env_id_arg, quiet_old_versions
from .schema import cli_count, cli_count0, cli_seed, cli_train_seed


class KenvArgumentParser(argparse.ArgumentParser):
    """argparse with kenv's error form: one line on stderr, exit status 2
    (argparse's own prints the usage first; the one line names the flag).  The
    subcommand parsed records its prog and its flags by dest in the namespace
    (``_prog``, ``_flags``): kenv's own errors for it name the flag from these."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, recording in ``_prog`` the prog of the deepest
        (sub)command parsed (``kenv discover``): kenv's own errors for a
        subcommand then carry argparse's prefix for it (:func:`main`)."""
        ns, rest = super().parse_known_args(args, namespace)
        if getattr(ns, "_prog", None) is None:   # (a subcommand's parser returns first)
            ns._prog = self.prog
            # its flags by dest: an error about an argument names the flag (main)
            ns._flags = {a.dest: next((o for o in a.option_strings if o.startswith("--")), a.option_strings[0])
                         for a in self._actions if a.option_strings and a.dest != argparse.SUPPRESS}
        return ns, rest


def version() -> str:
    """The installed kenv-gym's version (kenv.__version__ when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kenv-gym")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _add_common(p: argparse.ArgumentParser, seed: Callable[[str], int] = cli_seed) -> None:
    """--json, and --seed (``cli_train_seed`` for a command that trains: kenv.schema.check_seed)."""
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--seed", type=seed, default=0, help="random seed, an integer >= 0 (default 0)")


def _no_seed(p: argparse.ArgumentParser, allowed: str) -> None:
    """Refuse ``--seed`` (every other command's flag) where argparse would take it for an
    abbreviation of ``--seeds``, a count: ``kenv rediscover --seed 3`` trained seeds 0..2."""
    def refuse(text: str):
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {allowed}")

    p.add_argument("--seed", type=refuse, help=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    from .experiments import add_experiment_parsers

    parser = KenvArgumentParser(prog="kenv", description="kenv: a simulated Linux kernel as a Gymnasium environment")
    parser.add_argument("--version", action="version", version=f"kenv {version()}")
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
    ev.add_argument("--env", required=True, type=env_id_arg, help="environment id, e.g. kenv/Raid6Bench-v3")
    ev.add_argument("--policy", default="all",
                    help="original, pre_patch, patched, random, oracle, all (default), or model (the --model "
                         "row alone)")
    ev.add_argument("--episodes", type=cli_count, default=20, help="episodes per policy (default 20)")
    ev.add_argument("--profile", default="balanced", help="reward profile: balanced, latency, throughput or a YAML path")
    ev.add_argument("--model", default=None, metavar="PATH.zip",
                    help="also score this SB3 model (kenv train's model.zip or run directory) as the row 'model'; "
                         "read without unpickling anything from it (an SB3 zip holds pickled fields: code)")
    ev.add_argument("--trust-model", action="store_true",
                    help="let SB3 unpickle the --model file (runs code from it: only for files you trust)")
    ev.add_argument("--record", default=None, metavar="PATH",
                    help="write one JSON Lines record per evaluated episode here (kenv validate replays them)")
    ev.add_argument("--actions", action="append", default=None, metavar="A,B,...",
                    help="the env's action set: the action values of its decision (e.g. hardirq,workqueue,timer "
                         "on RandomMix, for --policy original); kenv/Kernel-*: DECISION=A,B,... once per "
                         "decision (deferral, wait, raid6)")
    _add_common(ev)
    ev.set_defaults(_run=_evaluate)

    va = sub.add_parser("validate", help="replay every episode record of a JSON Lines file; exit 1 on any mismatch")
    va.add_argument("path", help="a records file (kenv.RecordEpisodes, kenv evaluate --record)")
    va.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    va.add_argument("--strict", action="store_true",
                    help="fail a record that replays but is not an episode of its id's benchmark (an env not "
                         "made as its id is registered, a forced scenario, a profile other than balanced, a "
                         "field records do not have), and print each id's benchmark row (mean return and "
                         "normalised score of its ten evaluation episodes): for a benchmark's table")
    # --seed stays accepted (scripts pass it; flags are not taken away) but means nothing here
    va.add_argument("--seed", type=cli_seed, default=None,
                    help="ignored: each record is replayed from its own seed (kept for scripts that pass it)")
    va.set_defaults(_run=_validate)

    b = sub.add_parser("bench", help="steps/s of each kenv env as a ratio to CartPole-v1 in the same run")
    b.add_argument("--steps", type=cli_count, default=3000, help="steps per env (default 3000)")
    b.add_argument("--env", action="append", default=None, type=env_id_arg, help="only this env id (repeatable)")
    b.add_argument("--warmup", type=cli_count0, default=None,
                   help="untimed steps of each env before it is timed (default 1000; 0: a fresh env)")
    _add_common(b)
    b.set_defaults(_run=_bench)

    tr = sub.add_parser("train", help="train an SB3 agent from an RL-Zoo-style YAML config (agents/train.py)")
    _train_module().add_arguments(tr)
    _add_common(tr, cli_train_seed)
    tr.set_defaults(_run=lambda a: _train_module().run_from_args(a))

    rd = sub.add_parser("rediscover", help="train on every env and check that the agent finds the patch")
    _rediscover_module().add_arguments(rd)
    rd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    _no_seed(rd, "no --seed in kenv rediscover: --seeds N trains the seeds 0..N-1")
    rd.set_defaults(_run=lambda a: _rediscover_module().run_from_args(a))

    bm = sub.add_parser("benchmark", help="train PPO, A2C and DQN on every id over seeds: mean return ± 95%% "
                        "interval and normalised score beside random, patched and oracle (records for kenv validate)")
    _benchmark_module().add_arguments(bm)
    _no_seed(bm, "no --seed in kenv benchmark: --seeds N trains the seeds 0..N-1")
    bm.set_defaults(_run=lambda a: _benchmark_module().run_from_args(a))

    dc = sub.add_parser("discover", help="search the extended actions: patch, best static and learned "
                        "policy on held-out episodes, and the learned policy as a rule")
    _discover_module().add_arguments(dc)
    _no_seed(dc, "no --seed in kenv discover: --train-seed S (the training run's seed), --seeds N (episodes)")
    dc.set_defaults(_run=lambda a: _discover_module().run_from_args(a))

    from .trace.cli import add_trace_parser
    add_trace_parser(sub, _add_common)
    return parser


def _reproduce(args: argparse.Namespace):
    from .experiments.reproduce import run_reproduce

    return run_reproduce(seed=args.seed, fast_forward=args.fast_forward)


def _evaluate(args: argparse.Namespace):
    from kenv.agents.evaluate import evaluate

    return evaluate(args.env, args.policy, episodes=args.episodes, seed=args.seed, profile=args.profile,
                    model=args.model, trust_model=args.trust_model, record=args.record, actions=args.actions)


def _validate(args: argparse.Namespace):
    from .envs.validate import validate

    if args.seed is not None:
        print("kenv validate: note: --seed is ignored: each record is replayed from its own seed", file=sys.stderr)
    return validate(args.path, strict=args.strict)


def _bench(args: argparse.Namespace):
    from .envs.bench import run_bench

    warmup = {} if args.warmup is None else {"warmup": args.warmup}   # (None: run_bench's default)
    return run_bench(steps=args.steps, env_ids=args.env, seed=args.seed, **warmup)


def _train_module():
    from kenv.agents import train

    return train


def _rediscover_module():
    from kenv.agents import rediscover

    return rediscover


def _benchmark_module():
    from kenv.agents import benchmark

    return benchmark


def _discover_module():
    from kenv.agents import discover

    return discover


def _flag_of(args: argparse.Namespace, about: str) -> str:
    """``argument --FLAG: `` for the flag whose dest is ``about`` (a ConfigError's
    ``argument``, or its ``field`` where that is the argument: kenv.errors.about) in the
    command parsed; "" for anything else (a field that is a flag already, ``--model``)."""
    flag = getattr(args, "_flags", {}).get(about)
    return f"argument {flag}: " if flag else ""


def _about(e: BaseException) -> str:
    """What a ConfigError or OSError is about: nothing more to say for a field that is a
    flag (``--model``), else the argument :func:`kenv.errors.about` set, else the field
    (a value validated with its parameter's name as the field: ``platform``)."""
    field = getattr(e, "field", "")
    return "" if field.startswith("--") else getattr(e, "argument", "") or field


def _json_safe(obj: object) -> object:
    """``obj`` with every NaN or infinity as None: ``--json`` prints JSON (Python's
    ``NaN``, e.g. the 95% interval of one episode, is not), the keys unchanged."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def main(argv: Sequence[str] | None = None) -> int:
    quiet_old_versions()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:   # a bare `kenv`: its commands, as pip and docker list theirs
        sys.stdout.write(parser.format_help())
        return 0
    args, rest = parser.parse_known_args(_dash_values(parser, argv))
    prog = getattr(args, "_prog", parser.prog)   # argparse's prefix for the subcommand: kenv discover
    if rest:   # (parse_args would say "kenv: error:" for every subcommand)
        parser.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(rest)}\n")
    try:
        result = args._run(args)
    except ConfigError as e:
        # one line: the flag, the value and what is allowed
        parser.exit(2, f"{prog}: error: {_flag_of(args, _about(e))}{' '.join(str(e).split())}\n")
    except JobError as e:   # a job that failed on the cluster: one line naming it
        parser.exit(1, f"{prog}: error: {e}\n")
    except OSError as e:   # the filesystem (an --out that cannot be written, a full disk, ...)
        parser.exit(2, f"{prog}: error: {_os_error(args, e)}\n")
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback (train and rediscover say more)
        parser.exit(130, f"{prog}: interrupted\n")
    try:
        if args.json:
            doc = result.to_dict()
            estimate = _estimate(args, prog)
            if estimate is not None:
                doc["estimate_s"] = round(estimate, 1)
            sys.stdout.write(json.dumps(_json_safe(doc), indent=2, allow_nan=False) + "\n")
        else:
            sys.stdout.write(result.format_text().rstrip("\n") + "\n")
        sys.stdout.flush()
    except OSError as e:   # stdout closed (`| head -1`) or full (`> /dev/full`)
        _detach_stdout()
        if isinstance(e, BrokenPipeError):   # the reader has what it wanted: quiet, as SIGPIPE would be
            return 128 + 13
        parser.exit(1, f"{prog}: error: cannot write the standard output: {e.strerror or e}\n")
    return getattr(result, "exit_code", 0)


def _estimate(args: argparse.Namespace, prog: str) -> float | None:
    """The seconds of work the flags asked for (kenv.agents.estimate), for ``--json``."""
    command = prog.split()[1] if len(prog.split()) > 1 else ""
    if command not in ("train", "rediscover", "discover", "evaluate"):
        return None
    from kenv.agents.estimate import estimate_s

    return estimate_s(command, args)


def _detach_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's own flush at exit fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _os_error(args: argparse.Namespace, e: OSError) -> str:
    """One line for an OS error: the flag, the operation and the path where known (a
    full disk inside a library's own write names no path: the folder written is said)."""
    name = str(getattr(e, "filename", None) or "")
    why = e.strerror or str(e)
    if isinstance(e, FileError):
        return f"{_flag_of(args, _about(e))}cannot {e.operation} {name}: {why}"
    if name:
        return f"{_flag_of(args, _about(e))}{name}: {why}"
    out = getattr(args, "out", None)
    return f"argument --out: {why} (while writing under {out})" if isinstance(out, str) and out else why


def _dash_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with a value that starts with a dash glued to the flag before it
    (``--load -1/2`` -> ``--load=-1/2``): argparse takes "-1/2" for a flag and says
    "expected one argument" instead of checking the value.  Only tokens that are a dash
    and then neither a letter nor a dash (``-1/2``, ``-0.5``, ``-1e3``) are glued, after
    a flag of kenv's that takes a value."""
    takes_value: set[str] = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend(a.choices.values())
            elif a.option_strings and a.nargs != 0:
                takes_value.update(a.option_strings)
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.extend(argv[i:])
            break
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in takes_value and len(nxt) > 1 and nxt[0] == "-" and not (nxt[1].isalpha() or nxt[1] == "-"):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
