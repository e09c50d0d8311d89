"""``kenv train``: an SB3 agent on a kenv environment, from an RL-Zoo-style YAML config.

    kenv train --config ppo [--env kenv/Raid6Bench-v3] [--seed 0] [--out DIR] [--resume]
    kenv train --config configs/train/ppo.yaml --algo a2c ...

This module is the training loop and its command line; the rest of ``kenv.agents`` is
cut along RL Baselines3 Zoo's seams, one concern per module:

    :mod:`.files`        atomic writes, JSON, the directory lock (:class:`DirLock`)
    :mod:`.config`       the YAML config: loading, validation (:func:`load_train_config`),
                         the environments it describes (:func:`make_env`)
    :mod:`.callbacks`    evaluation on fixed seeded episodes, atomic checkpoints
    :mod:`.checkpoints`  what a checkpoint holds, and resuming from it exactly
    :mod:`.policy`       a trained model as a policy, and its summary per scenario context

:func:`train` reads top to bottom: the arguments (:class:`TrainArgs`), the config, the
run directory, the model (new or from a checkpoint), the callbacks, the loop, the
policy summary and ``result.json``.  The public names of those modules stay importable
from here too.

Config files
    ``configs/train/<algo>.yaml`` in the RL Baselines3 Zoo format: one block per env id
    with ``n_envs``, ``n_timesteps``, ``policy``, ``policy_kwargs`` (a ``"dict(...)"``
    string, as the Zoo writes it, or a mapping), schedules as ``lin_<value>``,
    ``env_wrapper``, and every other key passed to the algorithm's constructor.  A config
    file is data: ``policy_kwargs`` is parsed (``ast``), never evaluated, and may name
    only allow-listed activation functions and optimisers; ``env_wrapper`` only the
    wrappers of :data:`ALLOWED_WRAPPERS`, with plain-data arguments.  The
    algorithm comes from ``--algo`` or the file name (``ppo.yaml`` -> PPO), so
    ``python -m rl_zoo3.train --algo ppo --gym-packages kenv --env kenv/Raid6Bench-v3
    --conf-file configs/train/ppo.yaml`` reads the same file.  One kenv extension:
    ``env_kwargs`` (a mapping given to ``gym.make``), which the Zoo does not know (it
    takes ``--env-kwargs`` on its command line); the shipped files do not use it.
    Zoo keys kenv does not implement (``normalize``, ``frame_stack``,
    ``vec_env_wrapper``, ``callback``, ``monitor_kwargs``) are refused with a
    :class:`ConfigError`.

Run directory (``--out``; default ``runs/<env>__<algo>__<seed>``, e.g.
``runs/kenv_Raid6Bench-v3__ppo__0``: no timestamp, so that ``--resume`` finds it)
    ``run.yaml``               the resolved configuration and its fingerprint
    ``logs/progress*.csv``     SB3 scalars (``progress.csv``; a resumed segment writes
                               ``progress_resumed_<steps>.csv``)
    ``logs/tb/``               TensorBoard event files, only when the ``tensorboard``
                               package is importable (it is optional; CSV is always written)
    ``monitor/<rank>.monitor.csv``  training episodes (return, length, time)
    ``evaluations.csv``        the learning curve: deterministic policy on the same
                               seeded episodes (seeds ``EVAL_SEED + i``) every ``eval_freq`` steps
    ``checkpoints/model_<steps>_steps.zip`` (+ ``.json``: steps and wall time so far;
                               ``state_<steps>_steps.pkl``: the training envs and random
                               generators; DQN also ``replay_buffer_<steps>_steps.pkl``)
    ``best_model.zip``         the best model on the evaluation episodes
    ``model.zip``              the final model
    ``policy_summary.json``    the action taken per scenario context (deterministic policy,
                               each context forced with ``reset(options={"scenario": ctx})``)
    ``result.json``            written last: its presence marks a finished run

Every file written whole (models, checkpoints, evaluations.csv, the JSON and YAML files)
is written atomically (a temporary ``.kenv-tmp-*`` file in the same directory, then
``os.replace``; ``--resume`` deletes the temporary files a kill left behind), so an
interrupted run never leaves a half-written checkpoint or result.  The append-only logs
(``logs/progress*.csv``, ``monitor/``) are SB3's own, written line by line.

Resume
    Checkpoints are taken at rollout boundaries (the start of the first rollout at or after
    every ``--checkpoint-freq`` steps, and the end of training), where the weights,
    the optimiser state, the step counter, the training environments (mid-episode;
    ``state_<steps>_steps.pkl``) and the random generators are the whole state of the
    run.  ``--resume`` continues from the newest checkpoint with all of that restored,
    so a resumed run is the uninterrupted run: the same rollouts, the same model, the
    same evaluations, bit for bit (only wall times differ; the Monitor CSVs are cut back
    to the checkpoint and the episodes after it written again).  A finished run
    (``result.json``) is reported, not retrained; one whose ``model.zip`` or
    ``policy_summary.json`` was deleted is finished again from its newest checkpoint (the
    final one: the same ``model.zip``).
    ``--resume`` refuses a run directory made with a different configuration, and every
    run file it reads is checked: a damaged or foreign one (``run.yaml``, a checkpoint,
    ``evaluations.csv``, ``result.json``) is an error naming it, and so is a lost
    ``evaluations.csv`` beside checkpoints (``best_model.zip`` is kept against it).  A
    run directory holds pickles (SB3's zips, the state files, DQN's replay buffer):
    resume only run directories you trust, as you would load only models you trust;
    config files, in contrast, are only data.
    ``<out>/.lock`` (``flock``) keeps a second run from writing the same directory.

Determinism
    ``torch.set_num_threads(1)``, SB3 ``seed=``, environment seeds ``seed + rank``, and
    evaluation on fixed seeds: the same command gives the same model and numbers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Callable

import yaml
from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict   # (pydantic reads typing's only from Python 3.12)

import kenv
from kenv.errors import ConfigError, about
from kenv.schema import check_int, check_seed, validate

# The public names below were all defined in this module before it was split along RL
# Zoo's seams; they stay importable from here (tests, benchmarks and users' scripts).
from .checkpoints import (  # noqa: F401
    EVAL_FIELDS, list_checkpoints, load_checkpoint, read_evaluations, read_run_state, read_run_yaml_checked,
    restore_envs, restore_rng, run_state, save_checkpoint, truncate_monitors, write_evaluations,
)
from .config import (  # noqa: F401
    ALGO_NAMES, ALLOWED_WRAPPERS, HYPERPARAMETER_RANGES, MAX_ENVS, MAX_HYPERPARAMETER, MAX_SEED, MAX_TIMESTEPS,
    NN_ACTIVATIONS, POSITIVE, RESERVED_KEYS, RMSPROP_TF_LIKE, TORCH_OPTIMIZERS, UNSUPPORTED_ZOO_KEYS, TrainConfig,
    Timesteps, algorithms, check_env_id, config_env_ids, load_train_config, make_env,
    make_train_vec_env, packaged_train_configs, parse_policy_kwargs, read_config_file, registered_env_ids,
    resolve_wrapper, validate_block,
)
from .estimate import announce, train_s
from .files import (  # noqa: F401
    LOCK_NAME, DirLock, atomic_write_bytes, atomic_write_json, atomic_write_text, env_slug, json_default, make_out_dir,
    TMP_PREFIX, read_json, remove_stale_tmp, save_model_atomic,
)
from .policy import (  # noqa: F401
    EVAL_SEED, SUMMARY_SEED, ModelPolicy, action_key, context_label, format_summary, load_model, policy_summary, read_run_yaml,
    varying_fields,
)

#: bound of --eval-episodes
MAX_EVAL_EPISODES = 10_000

#: the rollout of an on-policy algorithm when its config block sets no n_steps, and DQN's
#: train_freq when it sets none (stable-baselines3's defaults)
SB3_N_STEPS = MappingProxyType({"ppo": 2048, "a2c": 5})
SB3_TRAIN_FREQ = 4


def rollout_steps(cfg: TrainConfig) -> int | None:
    """Env steps SB3 collects between two looks at the budget: n_envs x n_steps (PPO,
    A2C), n_envs x train_freq (DQN; None when train_freq counts episodes).  ``learn()``
    trains whole rollouts: it stops at the first multiple at or past the budget."""
    if cfg.algo in SB3_N_STEPS:
        return cfg.n_envs * int(cfg.hyperparams.get("n_steps", SB3_N_STEPS[cfg.algo]))
    freq = cfg.hyperparams.get("train_freq", SB3_TRAIN_FREQ)
    if isinstance(freq, (list, tuple)):
        if len(freq) != 2 or freq[1] != "step":
            return None
        freq = freq[0]
    return cfg.n_envs * int(freq)


def steps_to_train(cfg: TrainConfig, start: int = 0) -> int | None:
    """The steps a run of ``cfg`` trains, from step ``start`` (a resumed run's checkpoint):
    n_timesteps rounded up to whole rollouts past ``start`` (None: not known in advance)."""
    r = rollout_steps(cfg)
    if r is None:
        return None
    left = cfg.n_timesteps - start
    return start + (-(-left // r) * r if left > 0 else 0)


def overshoot_line(cfg: TrainConfig, start: int = 0) -> str | None:
    """One line when n_timesteps is not whole rollouts: the steps the run will train instead."""
    m = steps_to_train(cfg, start)
    if m is None or m == max(cfg.n_timesteps, start):
        return None
    n_steps = "train_freq" if cfg.algo not in SB3_N_STEPS else "n_steps"
    return (f"{cfg.env_id}: n_timesteps {cfg.n_timesteps:,} is not a multiple of a rollout (n_envs x {n_steps} = "
            f"{rollout_steps(cfg):,} steps); SB3 trains whole rollouts: the run will train {m:,} steps")


def default_out_dir(env_id: str, algo: str, seed: int) -> str:
    """``runs/<env>__<algo>__<seed>``: deterministic, so ``--resume`` finds it."""
    return os.path.join("runs", f"{env_slug(env_id)}__{algo}__{seed}")


def read_result(path: str) -> TrainResult:
    """result.json of a finished run, checked: a ConfigError naming it when it is not one."""
    allowed = ("the JSON object kenv train writes last (" + ", ".join(TrainResult.__dataclass_fields__)
               + "); delete it to finish the run again from its last checkpoint")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(path, "unreadable", f"{allowed} ({type(e).__name__})") from None
    return validate(_RESULT_FILE, d, path, allowed)


# ------------------------------------------------------------------------------ train
@dataclass
class TrainArgs:
    config: str = "ppo"
    env: str | None = None
    algo: str | None = None
    seed: int = 0
    out: str | None = None
    resume: bool = False
    n_timesteps: int | None = None  # override the config's budget
    eval_freq: int | None = None  # env steps; default n_timesteps / 8
    eval_episodes: int = 10
    checkpoint_freq: int | None = None  # env steps; default n_timesteps / 4
    summary_episodes: int = 3
    progress_bar: bool = False
    verbose: int = 0


@with_config(ConfigDict(extra="allow"))   # (read_result keeps the other keys of a row)
class SummaryRow(TypedDict):
    """The entries of a policy summary row (kenv.agents.policy.policy_summary) a result reads."""
    context: str
    action: str
    share: float
    return_mean: float


@dataclass
class TrainResult:
    run_dir: str
    env_id: str
    algo: str
    seed: int
    steps: int
    wall_s: float
    eval_return: float
    eval_ci95: float
    summary: list[SummaryRow]
    tensorboard: bool
    resumed_from: int | None = None
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainResult":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def format_text(self) -> str:
        lines = [f"{self.env_id}  {self.algo.upper()}  seed={self.seed}  steps={self.steps}  wall={self.wall_s:.1f}s"
                 + (f"  (resumed from step {self.resumed_from})" if self.resumed_from is not None else ""),
                 f"final evaluation: {self.eval_return:.3f} ± {self.eval_ci95:.3f} (deterministic, 95% CI)",
                 "", "policy per scenario context (deterministic):", format_summary(self.summary), "",
                 f"run dir: {self.run_dir}",
                 "logs: CSV (logs/progress*.csv, monitor/, evaluations.csv)"
                 + ("; TensorBoard (logs/tb)" if self.tensorboard else "; no TensorBoard (package not installed)")]
        return "\n".join(lines)


#: env keyword arguments that may name a YAML file (kenv.envs.config.load_yaml)
FILE_KWARGS = ("profile", "scenario")


#: what :func:`read_result` accepts: a TrainResult's fields with their types (a bit flipped in a
#: key of a summary row is an error naming result.json, not a KeyError where the row is read)
_RESULT_FILE = TypeAdapter(TrainResult)


def fingerprint(cfg: TrainConfig, seed: int, args: TrainArgs) -> str:
    """The run's identity for resuming.  An env keyword argument that names a YAML file
    (a ``profile`` or ``scenario`` path) counts by the file's content, not its name:
    an edited file is another run."""
    doc = {"env": cfg.env_id, "algo": cfg.algo, "seed": seed, "hyperparams": cfg.raw(),
           "eval_episodes": args.eval_episodes, "kenv": kenv.__version__}
    files = {}
    for k in FILE_KWARGS:
        v = (cfg.env_kwargs or {}).get(k)
        if isinstance(v, (str, os.PathLike)) and os.path.isfile(v):   # (load_yaml: a file before a name)
            try:
                with open(v, "rb") as f:
                    files[k] = hashlib.sha256(f.read()).hexdigest()
            except OSError:   # (the env's own load names the file and the reason)
                files[k] = "unreadable"
    if files:   # (absent otherwise: runs without such a file keep their fingerprints)
        doc["env_kwargs_files"] = files
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: the files of a finished run that --resume writes again from its newest checkpoint when one is lost
FINISHED_FILES = ("model.zip", "policy_summary.json")


def check_resumable(run_dir: str, fp: str) -> bool:
    """Whether ``run_dir`` holds a run to resume (False: absent or empty); a ConfigError
    (field ``--resume``) when the run there was made with another fingerprint."""
    if not os.path.isdir(run_dir) or not any(f != LOCK_NAME for f in os.listdir(run_dir)):
        return False
    run = read_run_yaml_checked(run_dir)
    if run is None or run.get("fingerprint") != fp:
        raise ConfigError("--resume", run_dir, "a run dir made with the same config, env, algo and seed "
                          f"(its run.yaml has fingerprint {None if run is None else run.get('fingerprint')}, "
                          f"this config gives {fp}); use another --out")
    return True


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def configure_torch() -> None:
    """One thread: reproducible, and faster for small networks on a 2-core machine."""
    import torch

    torch.set_num_threads(1)


def train(args: TrainArgs, cfg: TrainConfig | None = None, log: Callable[[str], None] | None = None) -> TrainResult:
    """Train (or resume, or report a finished run) as described in the module docstring."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    cfg = cfg or load_train_config(args.config, args.env, args.algo)
    if args.n_timesteps is not None:
        cfg.n_timesteps = validate(TypeAdapter(Timesteps), args.n_timesteps, "--n-timesteps",
                                   f"an integer in 1..{MAX_TIMESTEPS}")
    seed = check_seed(args.seed, "--seed", train=True)
    run_dir = default_out_dir(cfg.env_id, cfg.algo, seed) if args.out is None else args.out   # ("": refused)
    make_out_dir(run_dir, "--out")
    with DirLock(run_dir, "--out"), about("out"):   # (the run dir's own files: damaged, unwritable)
        return _train_locked(args, cfg, seed, run_dir, log)


def _train_locked(args: TrainArgs, cfg: TrainConfig, seed: int, run_dir: str, log: Callable[[str], None]):
    from stable_baselines3.common.callbacks import CallbackList

    from .callbacks import AtomicCheckpointCallback, SeededEvalCallback
    from stable_baselines3.common.logger import Logger, make_output_format

    fp = fingerprint(cfg, seed, args)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    monitor_dir = os.path.join(run_dir, "monitor")

    # ------------------------------------------------------------- the run dir
    existing = any(f != LOCK_NAME for f in os.listdir(run_dir))
    if existing and not args.resume:
        raise ConfigError("--out", run_dir, "a new or empty directory (pass --resume to continue the run in it)")
    if existing:
        check_resumable(run_dir, fp)
        remove_stale_tmp(run_dir)
        for d in ("checkpoints", "logs", "monitor"):
            p = os.path.join(run_dir, d)
            if os.path.lexists(p) and not os.path.isdir(p):
                raise ConfigError(p, "not a directory", f"the run's {d} directory (move the file away)")
        done = os.path.join(run_dir, "result.json")
        if os.path.lexists(done):
            res = read_result(done)
            # (policy_summary.json too: the rebuild writes model.zip first, so a rebuild killed before it
            # rewrote a lost policy_summary.json left model.zip and result.json and said 'nothing to do')
            lost = [f for f in FINISHED_FILES if not os.path.lexists(os.path.join(run_dir, f))]
            if not lost:
                # (best_model.zip and the checkpoints are not rebuilt: the final checkpoint holds only
                # the final model; the user is told what the run no longer has)
                gone = dict.fromkeys(f.split(os.sep)[0] + (os.sep + "..." if os.sep in f else "") for f in res.files
                                     if not os.path.lexists(os.path.join(run_dir, f)))
                log(f"{run_dir}: finished run, nothing to do" + (
                    f" (deleted since it finished, not rebuilt: {', '.join(gone)})" if gone else ""))
                return res
            # (its final checkpoint holds the final model: finishing again from it writes the same files)
            log(f"{run_dir}: finished run without {' and '.join(lost)}: finishing it again from its newest checkpoint")
    run_doc = {"env": cfg.env_id, "algo": cfg.algo, "seed": seed, "config": cfg.source, "n_timesteps": cfg.n_timesteps,
               "hyperparams": cfg.raw(), "eval_episodes": args.eval_episodes, "eval_seed": EVAL_SEED,
               "kenv": kenv.__version__, "fingerprint": fp}
    if not existing:
        atomic_write_text(os.path.join(run_dir, "run.yaml"), yaml.safe_dump(run_doc, sort_keys=False))

    # ------------------------------------------------------------- model
    configure_torch()
    algo_cls = algorithms()[cfg.algo]
    ckpts = list_checkpoints(ckpt_dir)
    model, start_steps, wall_offset = None, 0, 0.0
    evaluations = read_evaluations(run_dir)  # checked before anything is loaded or cut back
    if ckpts and not evaluations:
        # (a run evaluates before its first checkpoint: with its curve lost, the first evaluation
        # after the checkpoint would beat -inf and replace best_model.zip with a model that is not the best)
        raise ConfigError(os.path.join(run_dir, "evaluations.csv"), "missing",
                          "the run's evaluations up to its newest checkpoint, which best_model.zip is kept against "
                          "(restore the file, or remove checkpoints/ to train the run again from the start)")
    if ckpts:  # the newest complete checkpoint
        model, start_steps, wall_offset = load_checkpoint(cfg, algo_cls, seed, ckpt_dir, ckpts[0], monitor_dir, log)
        log(f"resuming {run_dir} from {ckpts[0][1]} ({start_steps} steps)")
    history = [h for h in evaluations if h["timesteps"] <= start_steps]
    announce("kenv train", train_s(cfg.env_id, cfg.n_timesteps - start_steps), log)
    note = overshoot_line(cfg, start_steps)
    if note:
        log(note)
    if model is None:
        try:
            with about("config"):   # (hyperparameters the algorithm refuses)
                model = build_model(cfg, make_train_vec_env(cfg, seed, monitor_dir, append=False), seed, args.verbose)
        except ConfigError:
            if not existing:   # (a new run the algorithm refuses: a rerun with the config fixed is a new run too)
                remove_new_run(run_dir)
            raise
    tb = tensorboard_available()
    remaining = cfg.n_timesteps - start_steps
    suffix = "" if start_steps == 0 else f"_resumed_{start_steps}"
    log_dir = os.path.join(run_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    formats = []
    if remaining > 0:   # (a run finished from its final checkpoint trains nothing: no empty segment log)
        formats.append(make_output_format("csv", log_dir, suffix))
        if tb:
            formats.append(make_output_format("tensorboard", os.path.join(log_dir, "tb"), suffix))
        if args.verbose:
            formats.append(make_output_format("stdout", log_dir, suffix))
    model.set_logger(Logger(folder=log_dir, output_formats=formats))

    # ------------------------------------------------------------- callbacks
    eval_freq = args.eval_freq or max(1, cfg.n_timesteps // 8)
    ckpt_freq = args.checkpoint_freq or max(1, cfg.n_timesteps // 4)
    best = max([h["mean_return"] for h in history], default=-math.inf)
    t0 = time.perf_counter()
    callbacks = [SeededEvalCallback(cfg, run_dir, eval_freq, args.eval_episodes, history, best),
                 AtomicCheckpointCallback(ckpt_dir, ckpt_freq, wall_offset, t0)]

    # ------------------------------------------------------------- the loop
    try:
        if remaining > 0:
            model.learn(total_timesteps=remaining, callback=CallbackList(callbacks),
                        reset_num_timesteps=start_steps == 0, progress_bar=args.progress_bar)
        else:
            callbacks[0].init_callback(model)
            callbacks[0]._on_training_end()
    finally:
        model.logger.close()   # (its progress.csv and event files: a process that trains again keeps none open)
    wall_s = wall_offset + time.perf_counter() - t0
    save_model_atomic(model, os.path.join(run_dir, "model.zip"))
    model.get_env().close()

    # ------------------------------------------------------------- summary
    env = make_env(cfg)
    summary = policy_summary(env, ModelPolicy(model), episodes=args.summary_episodes)
    env.close()
    atomic_write_json(os.path.join(run_dir, "policy_summary.json"), summary)
    final = history[-1] if history else {"mean_return": float("nan"), "ci95": float("nan")}
    files = sorted(os.path.relpath(os.path.join(dp, f), run_dir) for dp, _, fs in os.walk(run_dir) for f in fs
                   if not f.startswith(TMP_PREFIX) and f != LOCK_NAME)
    result = TrainResult(run_dir, cfg.env_id, cfg.algo, seed, int(model.num_timesteps), wall_s,
                         final["mean_return"], final["ci95"], summary, tb,
                         resumed_from=start_steps or None, files=files + ["result.json"])
    atomic_write_json(os.path.join(run_dir, "result.json"), result.to_dict())
    # as a rerun would read it back (JSON: e.g. dict keys become strings)
    return TrainResult.from_dict(json.loads(json.dumps(result.to_dict(), default=json_default)))


def remove_new_run(run_dir: str) -> None:
    """Remove what a new run wrote in ``run_dir`` before it failed (run.yaml, monitor/):
    the directory held nothing but the lock before."""
    for f in os.listdir(run_dir):
        if f != LOCK_NAME:
            p = os.path.join(run_dir, f)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)


def build_model(cfg: TrainConfig, venv, seed: int, verbose: int = 0):
    """A new model on ``venv``; the values the algorithm itself refuses are a ConfigError."""
    try:
        return algorithms()[cfg.algo](cfg.policy, venv, seed=seed, device="cpu", verbose=verbose,
                                      **cfg.model_kwargs())
    except ConfigError:
        raise
    except (TypeError, ValueError, AssertionError, ArithmeticError, MemoryError, RuntimeError) as e:
        venv.close()
        raise ConfigError(f"{cfg.source}: {cfg.env_id}", "hyperparameters",
                          f"values {cfg.algo.upper()} accepts ({type(e).__name__}: {e})") from None


# -------------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    from kenv.schema import cli_integer

    p.add_argument("--config", required=True,
                   help="RL-Zoo-style YAML (path, or a packaged name: ppo, a2c, dqn)")
    p.add_argument("--env", default=None, help="env id (default: the only block in the config file)")
    p.add_argument("--algo", default=None, help="ppo, a2c or dqn (default: the config file's name)")
    p.add_argument("--out", default=None, help="run directory (default runs/<env>__<algo>__<seed>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its newest checkpoint")
    p.add_argument("--n-timesteps", type=cli_integer, default=None,
                   help="override the config's n_timesteps; SB3 trains whole rollouts (n_envs x n_steps), so a "
                        "budget between two multiples trains the next one (said on stderr; the steps trained "
                        "are steps in --json)")
    p.add_argument("--eval-freq", type=cli_integer, default=None, help="env steps between evaluations (default n_timesteps/8)")
    p.add_argument("--eval-episodes", type=cli_integer, default=10, help="seeded episodes per evaluation (default 10)")
    p.add_argument("--checkpoint-freq", type=cli_integer, default=None,
                   help="env steps between checkpoints (default n_timesteps/4)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="show a progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--verbose", type=cli_integer, default=0, help="SB3 verbosity (0, 1, 2)")


def run_from_args(args) -> TrainResult:
    progress = args.progress
    if progress is None:
        progress = sys.stdout.isatty() and not args.json
    if progress and (importlib.util.find_spec("tqdm") is None or importlib.util.find_spec("rich") is None):
        progress = False  # SB3's progress bar needs both
    ta = TrainArgs(config=args.config, env=args.env, algo=args.algo, seed=args.seed, out=args.out, resume=args.resume,
                   n_timesteps=args.n_timesteps, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
                   checkpoint_freq=args.checkpoint_freq, progress_bar=bool(progress), verbose=args.verbose)
    check_seed(ta.seed, "--seed", train=True)
    check_int(ta.eval_episodes, "--eval-episodes", 2, MAX_EVAL_EPISODES,
              f"an integer in 2..{MAX_EVAL_EPISODES} (at least 2 for a 95% interval)")
    for name in ("eval_freq", "checkpoint_freq", "n_timesteps"):
        check_int(getattr(ta, name), f"--{name.replace('_', '-')}", 1, MAX_TIMESTEPS, optional=True)
    check_int(ta.verbose, "--verbose", 0, 2, "0, 1 or 2")
    try:
        return train(ta)
    except KeyboardInterrupt:
        run = ta.out or "the run dir"
        print(f"kenv train: interrupted; continue with the same command and --resume (run dir: {run})",
              file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":  # pragma: no cover  (tested in a subprocess)
    # ``python -m kenv.agents.train ...`` is ``kenv train ...``: the same parser, the same
    # one-line errors for bad input (kenv.cli), not a second copy of the command line.
    from kenv.cli import main

    raise SystemExit(main(["train", *sys.argv[1:]]))
