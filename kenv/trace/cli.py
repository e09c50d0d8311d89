"""``kenv trace``: record a run and write it as Perfetto JSON or ftrace text.

    kenv trace experiment NAME [the flags of kenv experiment NAME] --out FILE
                               [--format perfetto|ftrace] [--window START:END]
    kenv trace env --env ID (--policy NAME | --model PATH) --steps N --out FILE
                   [--format perfetto|ftrace] [--window START:END] [--seed S]

``--window`` keeps a time range (seconds of simulated time since boot,
either side optional): slices that overlap it are kept whole, point events
and counter samples only inside it.  The file is written through a temporary
file in the same directory and renamed, so a failed run leaves nothing.

An experiment is recorded through :func:`kenv.trace.recording` (the first
Engine the experiment creates); ``qperf-tcp-lat`` runs the requested deferral
and then a ``none`` baseline on a second engine, which is not recorded.  An
environment episode is recorded from its ``reset()`` (boot included) to the
last step, with each step as a slice and an ``env_step`` instant carrying
the action and the reward.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ConfigError, about
from ..schema import check_int
from . import ENV_MACHINE, FORMATS, check_format, check_out_path, episode_kernels, parse_window
from .probes import counter_probes
from . import recording, write_trace
from .common import WINDOW_ALLOWED


def _add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="the trace file to write")
    p.add_argument("--format", default="perfetto",
                   help="perfetto (Chrome trace-event JSON for ui.perfetto.dev / chrome://tracing, "
                        "the default) or ftrace (text in the shape of trace-cmd report)")
    p.add_argument("--window", default=None, metavar="START:END",
                   help="keep only this range of simulated time: " + WINDOW_ALLOWED)


def add_trace_parser(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``trace`` to the ``kenv`` subcommands; ``add_common`` adds --json/--seed."""
    from ..envs.registration import env_id_arg
    from ..experiments import add_experiment_parsers
    from ..schema import cli_count

    tp = sub.add_parser("trace", help="record a run and write it as Perfetto JSON or ftrace text",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tsub = tp.add_subparsers(dest="trace_what", required=True)
    te = tsub.add_parser("experiment", help="record one seed experiment (same flags as kenv experiment)")
    esub = te.add_subparsers(dest="experiment", required=True)

    def configure(p: argparse.ArgumentParser, name: str, mod) -> None:
        add_common(p)
        _add_output(p)
        p.set_defaults(_run=functools.partial(run_trace_experiment, name=name, mod=mod))

    add_experiment_parsers(esub, configure)
    tv = tsub.add_parser("env", help="record an environment episode played by a baseline or a trained model")
    tv.add_argument("--env", required=True, type=env_id_arg, help="environment id, e.g. kenv/HwrngWait-v2")
    g = tv.add_mutually_exclusive_group(required=True)
    g.add_argument("--policy", help="a baseline: original, pre_patch, patched, random, oracle")
    g.add_argument("--model", help="a stable-baselines3 .zip saved by kenv train (PPO, A2C or DQN), "
                                   "or its run directory; read without unpickling anything from it "
                                   "(an SB3 zip holds pickled fields: code)")
    tv.add_argument("--trust-model", action="store_true",
                    help="let SB3 unpickle the --model file (runs code from it: only for files you trust)")
    tv.add_argument("--steps", type=cli_count, default=32, help="steps at most (default 32; the episode may end first)")
    tv.add_argument("--profile", default="balanced", help="reward profile (default balanced)")
    add_common(tv)
    _add_output(tv)
    tv.set_defaults(_run=run_trace_env)


#: above this, ``kenv trace`` suggests --window
LARGE_TRACE_BYTES = 100_000_000


@dataclass
class TraceResult:
    """What ``kenv trace`` prints: the file written and the run's own result."""

    trace: dict
    result: Any = None
    episode: list = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {"trace": self.trace}
        if self.result is not None and hasattr(self.result, "to_dict"):
            d["result"] = self.result.to_dict()
        if self.episode:
            d["episode"] = self.episode
        return d

    def format_text(self) -> str:
        t = self.trace
        n = t.get("events", t.get("lines"))
        unit = "events" if "events" in t else "lines"
        lines = [f"wrote {t['format']} trace {t['path']}: {n} {unit}, {t['bytes']:,} bytes; "
                 f"machines: {', '.join(t['machines']) or '-'}"
                 + (f"; window {t['window']} s" if t.get("window") else "")]
        if t["format"] == "perfetto":
            lines.append("  open it at https://ui.perfetto.dev (Open trace file) or chrome://tracing")
        if t["bytes"] > LARGE_TRACE_BYTES:
            lines.append("  a large trace: --window START:END (or a shorter run, e.g. qperf-tcp-lat "
                         "--time 1) keeps it small")
        if self.episode:
            tot = sum(s["reward"] for s in self.episode)
            lines.append(f"  {len(self.episode)} steps, return {tot:.4g}: "
                         + ", ".join(f"{s['action']}" for s in self.episode[:8])
                         + (" ..." if len(self.episode) > 8 else ""))
        if self.result is not None and hasattr(self.result, "format_text"):
            lines.append("")
            lines.append(self.result.format_text())
        return "\n".join(lines)


def _check_output_args(args: argparse.Namespace):
    fmt = check_format(args.format)
    win = parse_window(args.window)
    out = check_out_path(args.out)
    return fmt, win, out


def _plain_args(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if not k.startswith("_")
            and k not in ("out", "format", "window", "json", "command", "trace_what")}


def run_trace_experiment(args: argparse.Namespace, name: str, mod: Any) -> TraceResult:
    fmt, win, out = _check_output_args(args)
    with recording() as rec:
        result = mod.run_from_args(args)
    if rec.engine is None:  # pragma: no cover - every experiment builds an Engine
        raise RuntimeError(f"experiment {name} created no Engine to record")
    meta = {"command": f"kenv trace experiment {name}", "experiment": name,
            "arguments": _plain_args(args)}
    if name == "qperf-tcp-lat":
        meta["note"] = "the requested deferral's run; the 'none' baseline run is not recorded"
    with about("out"):
        summary = write_trace(rec, out, fmt, win, meta)
    return TraceResult(summary, result)


# ------------------------------------------------------------------ env episodes

class ModelPolicy:
    """A trained SB3 model playing deterministically."""

    def __init__(self, model: Any, path: str):
        self.model = model
        self.name = f"model:{os.path.basename(os.path.normpath(path))}"

    def reset(self, env, obs, info) -> None:
        pass

    def act(self, obs, info):
        action, _ = self.model.predict(obs, deterministic=True)
        return action


MODEL_ALLOWED = "a stable-baselines3 .zip saved by kenv train (PPO, A2C or DQN), or its run directory"


def load_model(path: str, env: Any, trust: bool = False) -> Any:
    """The model at ``path`` to act in ``env``, read without unpickling anything from
    the file unless ``trust`` (``kenv.agents.models``)."""
    if not isinstance(path, str) or not os.path.exists(path):
        raise ConfigError("model", path, MODEL_ALLOWED)
    from kenv.agents.policy import load_model as load

    return load(path, env=env, trust=trust, label="model")


def _make_env(env_id: str, profile: str):
    import gymnasium as gym

    import kenv  # noqa: F401  (registers the ids)
    from ..envs.registration import check_env_id
    from ..envs.reward import load_profile

    check_env_id(env_id)
    with about("profile"):   # checked alone first: a name, or a YAML file whose errors name a key of it
        load_profile(profile)
    return gym.make(env_id, profile=profile)


def run_trace_env(args: argparse.Namespace) -> TraceResult:
    fmt, win, out = _check_output_args(args)
    check_int(args.steps, "steps", 1)
    env = _make_env(args.env, args.profile)
    try:
        if args.model is not None:
            model = load_model(args.model, env, trust=args.trust_model)
            policy = ModelPolicy(model, args.model)
            pname = policy.name
        else:
            from kenv.agents.baselines import BASELINES, BaselineUnavailable, make_policy
            try:
                policy = make_policy(args.policy, env, seed=args.seed)
            except BaselineUnavailable:
                raise ConfigError("policy", args.policy, ", ".join(BASELINES)) from None
            pname = args.policy
        rec, episode, kernels = record_episode(env, policy, steps=args.steps, seed=args.seed)
    finally:
        env.close()
    meta = {"command": "kenv trace env", "env": args.env, "policy": pname, "seed": args.seed,
            "steps": len(episode), "profile": args.profile}
    with about("out"):
        summary = write_trace(rec, out, fmt, win, meta, kernels=kernels)
    return TraceResult(summary, None, episode)


def record_episode(env: Any, policy: Any, *, steps: int, seed: int = 0):
    """Play one episode (at most ``steps`` steps) with a recorder on its engine.

    Returns ``(recorder, per-step list, kernels)``.  The recorder is attached
    as the episode's Engine is created in ``reset()``, so boot is in the trace.
    """
    from ..sim.engine import Recorder
    from ..sim.engine import recording as engine_recording

    base = env.unwrapped
    rec = Recorder()
    episode: list[dict] = []
    with counter_probes():
        with engine_recording(rec):
            obs, info = env.reset(seed=seed)
        kernels = episode_kernels(base._episode)
        engines = []
        for k in kernels:
            if k.engine not in engines:
                engines.append(k.engine)
        for eng in engines:
            if eng.recorder is None:
                rec.attach(eng)
        eng = rec.engine if rec.engine is not None else engines[0]
        track = (ENV_MACHINE, 0)
        rec.instant("env", track, "env_reset", eng.now, seed=seed, scenario=json.dumps(info.get("scenario", {}),
                                                                                      default=str))
        policy.reset(env, obs, info)
        for i in range(steps):
            t0 = eng.now
            a = policy.act(obs, info)
            try:
                label = base.action_label(a)
            except ConfigError:
                label = str(a)
            obs, r, term, trunc, info = env.step(a)
            t1 = eng.now
            comps = info.get("reward_components", {})
            args = {"step": i, "action": label, "reward": float(r), "terminated": bool(term),
                    "truncated": bool(trunc)}
            rec.slice("env", track, f"step {i}: {label}", t0, t1, **args,
                      **{f"reward.{c}": float(v) for c, v in comps.items()})
            rec.instant("env", track, "env_step", t1, **args)
            episode.append({"step": i, "action": label, "reward": float(r), "t0_s": t0 / 1e9,
                            "t1_s": t1 / 1e9, "terminated": bool(term), "truncated": bool(trunc)})
            if term or trunc:
                break
        rec.finish()
    return rec, episode, kernels


__all__ = ["FORMATS", "TraceResult", "add_trace_parser", "load_model", "record_episode",
           "run_trace_env", "run_trace_experiment"]
