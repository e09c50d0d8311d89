"""Checkpoints and resume state of a training run.

Checkpoints are taken at rollout boundaries (:class:`kenv.agents.callbacks.AtomicCheckpointCallback`),
where the weights, the optimiser state, the step counter, the training environments
(mid-episode) and the random generators are the whole state of the run:
:func:`save_checkpoint` writes them (SB3's zip, ``state_<n>_steps.pkl`` from
:func:`run_state`, DQN's replay buffer, and last the ``.json`` record that makes the
checkpoint count), :func:`load_checkpoint` restores them so that a resumed run is the
uninterrupted run, bit for bit.  Every file a resume reads is checked (``run.yaml``,
the checkpoint's files, ``evaluations.csv``): a damaged or foreign one is a
:class:`ConfigError` naming it.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Annotated, Callable, Literal

import numpy as np
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo,
                      field_validator)

from kenv.envs.config import read_yaml_file
from kenv.errors import ConfigError
from kenv.schema import validate

from .config import TrainConfig, make_train_vec_env
from .files import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json, save_model_atomic


# ------------------------------------------------------------- the files, declared
def _of_this_checkpoint(v: int, info: ValidationInfo) -> int:
    """The step count of the checkpoint the file belongs to (validation context ``steps``)."""
    want = (info.context or {}).get("steps")
    if want is not None and v != want:
        raise ValueError(f"{want}, the checkpoint's step count")
    return v


_Steps = Annotated[int, Field(ge=0), AfterValidator(_of_this_checkpoint)]


class CheckpointRecord(BaseModel):
    """``model_<n>_steps.json``, written last: the checkpoint counts (context ``{"steps": n}``)."""

    model_config = ConfigDict(strict=True)
    steps: _Steps
    wall_s: Annotated[float, Field(allow_inf_nan=False)]


class EnvState(BaseModel):
    """One training environment in a state file (:func:`run_state`)."""

    model_config = ConfigDict(strict=True)
    env: bytes
    monitor_file: str | None = None
    monitor_bytes: Annotated[int, Field(ge=0)] | None = None


class RunState(BaseModel):
    """``state_<n>_steps.pkl`` (:func:`run_state`), checked with the context
    ``{"steps": n, "n_envs": N}``: the state at that step of that many environments."""

    model_config = ConfigDict(strict=True)
    version: Literal[1]
    steps: _Steps
    envs: list[EnvState]
    rng: dict

    @field_validator("envs")
    @classmethod
    def _every_env(cls, v: list, info: ValidationInfo) -> list:
        want = (info.context or {}).get("n_envs")
        if want is not None and len(v) != want:
            raise ValueError(f"{want} training environments")
        return v


class RunFile(BaseModel):
    """``run.yaml`` (kenv train writes the resolved config beside it); a resume compares
    its ``fingerprint``."""

    model_config = ConfigDict(extra="allow")
    fingerprint: Annotated[str, Field(strict=True)]


_CHECKPOINT_RECORD = TypeAdapter(CheckpointRecord)
_RUN_STATE = TypeAdapter(RunState)
_RUN_FILE = TypeAdapter(RunFile)
#: a row of evaluations.csv from its text (EVAL_FIELDS: the csv module reads strings)
_EVAL_ROW = TypeAdapter(tuple[Annotated[int, Field(ge=0)], float, float, float, float])


def save_checkpoint(model, ckpt_dir: str, wall_s: float) -> str:
    """``model_<n>_steps.zip`` (SB3's save: weights, optimiser, step counter, last
    observations), ``state_<n>_steps.pkl`` (:func:`run_state`: the training environments
    and the random generators), for DQN ``replay_buffer_<n>_steps.pkl``, and last
    ``model_<n>_steps.json`` (steps, wall time): a checkpoint counts only when that is there."""
    import pickle

    n = int(model.num_timesteps)
    path = os.path.join(ckpt_dir, f"model_{n}_steps.zip")
    if hasattr(model, "replay_buffer") and getattr(model, "replay_buffer", None) is not None:
        atomic_write_bytes(os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl"), pickle.dumps(model.replay_buffer))
    atomic_write_bytes(os.path.join(ckpt_dir, f"state_{n}_steps.pkl"), pickle.dumps(run_state(model)))
    save_model_atomic(model, path)
    atomic_write_json(path[:-4] + ".json", {"steps": n, "wall_s": wall_s})
    return path


def _monitor(env):
    """The SB3 Monitor in a training env's wrapper chain (an env_wrapper may sit above it)."""
    from stable_baselines3.common.monitor import Monitor

    e = env
    while not isinstance(e, Monitor):
        e = e.env
    return e


def run_state(model) -> dict:
    """What SB3's model zip leaves out and a resumed run needs to continue exactly: each
    training environment with its wrappers (pickled: a kenv env pickles as its seed state
    and the actions of its current episode, see kenv/envs/base.py; the Monitor keeps its
    episode accumulators, and the size of its CSV is noted), and the state of every random
    generator training draws from (Python's, numpy's global one, torch's, the model's
    action space)."""
    import pickle
    import random

    import torch

    envs = []
    for env in model.get_env().envs:  # a DummyVecEnv (make_train_vec_env)
        mon = _monitor(env)
        writer, mon.results_writer = mon.results_writer, None  # an open file: not pickled
        try:
            blob = pickle.dumps(env)
        finally:
            mon.results_writer = writer
        size = name = None
        if writer is not None:
            writer.file_handler.flush()
            name = os.path.basename(writer.file_handler.name)
            size = os.path.getsize(writer.file_handler.name)
        envs.append({"env": blob, "monitor_file": name, "monitor_bytes": size})
    return {"version": 1, "steps": int(model.num_timesteps), "envs": envs,
            "rng": {"random": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                    "action_space": model.action_space.np_random.bit_generator.state}}


def read_run_state(path: str, n: int, n_envs: int) -> dict:
    """A checkpoint's state file, checked (ConfigError naming the file if it is not one)."""
    import pickle

    try:
        with open(path, "rb") as f:
            state = pickle.load(f)  # noqa: S301 - written by save_checkpoint, beside SB3's own pickled zip
    except OSError as e:
        raise ConfigError(path, "unreadable", f"a checkpoint state file ({e.strerror})") from None
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a damaged file
        raise ConfigError(path, "not a checkpoint state", f"a file written by kenv train ({type(e).__name__}); "
                          "delete this checkpoint's files to resume from an older one") from None
    try:   # (the value is not shown: it holds the pickled environments)
        _RUN_STATE.validate_python(state, context={"steps": n, "n_envs": n_envs})
    except ValidationError:
        raise ConfigError(path, "not a checkpoint state of this run",
                          f"the state at step {n} of {n_envs} training environments, written by kenv train") from None
    return state


def restore_envs(venv, state: dict, path: str) -> None:
    """Put the checkpoint's environments (mid-episode, with their Monitors' accumulators)
    into a fresh DummyVecEnv, each Monitor writing on to the fresh one's CSV."""
    import pickle

    for i, st in enumerate(state["envs"]):
        fresh = venv.envs[i]
        try:
            env = pickle.loads(st["env"])  # noqa: S301 - see read_run_state
            mon = _monitor(env)
        except Exception as e:  # noqa: BLE001 - a damaged or foreign state
            raise ConfigError(path, f"environment {i}", f"a pickled training environment ({type(e).__name__}: {e})") \
                from None
        mon.results_writer = _monitor(fresh).results_writer
        env.unwrapped.spec = fresh.unwrapped.spec
        venv.envs[i] = env


def truncate_monitors(state: dict, monitor_dir: str) -> None:
    """Cut each Monitor CSV back to its size at the checkpoint: the episodes after it are
    run again (and written again) by the resumed run."""
    for st in state["envs"]:
        if st.get("monitor_file") and st.get("monitor_bytes") is not None:   # (RunState)
            p = os.path.join(monitor_dir, os.path.basename(st["monitor_file"]))
            if os.path.isfile(p) and os.path.getsize(p) > st["monitor_bytes"]:
                os.truncate(p, st["monitor_bytes"])


def restore_rng(model, state: dict) -> None:
    import random

    import torch

    rng = state["rng"]
    random.setstate(rng["random"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    model.action_space.np_random.bit_generator.state = rng["action_space"]


def list_checkpoints(ckpt_dir: str) -> list[tuple[int, str]]:
    """Complete checkpoints (zip + json), newest first."""
    out = []
    try:
        names = os.listdir(ckpt_dir)
    except OSError:
        return []
    for name in names:
        if name.startswith("model_") and name.endswith("_steps.json"):
            try:
                n = int(name[len("model_"):-len("_steps.json")])
            except ValueError:
                continue
            z = os.path.join(ckpt_dir, name[:-5] + ".zip")
            if os.path.isfile(z):
                out.append((n, z))
    return sorted(out, reverse=True)


def write_evaluations(run_dir: str, history: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["timesteps", "mean_return", "ci95", "min", "max"], lineterminator="\n")
    w.writeheader()
    for row in history:
        w.writerow(row)
    atomic_write_text(os.path.join(run_dir, "evaluations.csv"), buf.getvalue())


EVAL_FIELDS = ["timesteps", "mean_return", "ci95", "min", "max"]


def read_evaluations(run_dir: str) -> list[dict]:
    """evaluations.csv of a run dir ([] when there is none); a file that is not the one
    kenv train writes is a ConfigError naming it (not a silently shortened curve)."""
    path = os.path.join(run_dir, "evaluations.csv")
    if not os.path.lexists(path):
        return []
    allowed = "the CSV kenv train writes (" + ",".join(EVAL_FIELDS) + "; one row per evaluation, steps increasing)"
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(path, "unreadable", f"{allowed} ({e})") from None
    if header != EVAL_FIELDS:
        raise ConfigError(path, f"header {header}", allowed)
    out: list[dict] = []
    for i, r in enumerate(rows, start=2):
        try:
            row = dict(zip(EVAL_FIELDS, _EVAL_ROW.validate_python(tuple(r))))
            if out and row["timesteps"] <= out[-1]["timesteps"]:
                raise ValueError("steps not increasing")
        except ValueError as e:   # (a ValidationError is one)
            why = e.errors(include_url=False)[0]["msg"] if isinstance(e, ValidationError) else e
            raise ConfigError(f"{path} line {i}", ",".join(r), f"{allowed} ({why})") from None
        out.append(row)
    return out


def read_run_yaml_checked(run_dir: str) -> dict | None:
    """run.yaml of a run dir to resume: None when absent, a ConfigError naming it when it is
    not the mapping kenv train writes."""
    path = os.path.join(run_dir, "run.yaml")
    if not os.path.lexists(path):
        return None
    allowed = "the YAML mapping kenv train writes (env, algo, seed, fingerprint, ...)"
    run = read_yaml_file(path, path)
    validate(_RUN_FILE, run, path, allowed)
    return run


def load_checkpoint(cfg: TrainConfig, algo_cls, seed: int, ckpt_dir: str, ckpt: tuple[int, str], monitor_dir: str,
                    log: Callable[[str], None]):
    """(model, steps, wall time so far) from a checkpoint, with the training environments
    and random generators as they were (:func:`run_state`): training goes on exactly as
    the uninterrupted run did.  Every file of the checkpoint is checked; a damaged or
    foreign one is a ConfigError naming it."""
    n, path = ckpt
    meta_path = path[:-4] + ".json"
    meta = validate(_CHECKPOINT_RECORD, read_json(meta_path), meta_path,
                    f'the JSON object kenv train writes ({{"steps": {n}, "wall_s": <seconds>}}); delete this '
                    "checkpoint's files to resume from an older one", context={"steps": n})
    state_path = os.path.join(ckpt_dir, f"state_{n}_steps.pkl")
    state = read_run_state(state_path, n, cfg.n_envs) if os.path.lexists(state_path) else None
    if state is not None:
        truncate_monitors(state, monitor_dir)
    venv = make_train_vec_env(cfg, seed if state is not None else seed + n, monitor_dir, append=True)
    if state is not None:
        restore_envs(venv, state, state_path)
    try:
        model = algo_cls.load(path, env=venv, device="cpu", force_reset=state is None)
    except Exception as e:  # noqa: BLE001 - a damaged or foreign zip
        venv.close()
        raise ConfigError(path, "unreadable", f"an SB3 {cfg.algo.upper()} model written by kenv train "
                          f"({type(e).__name__}: {e}); delete this checkpoint's files to resume from an older one") \
            from None
    if hasattr(model, "load_replay_buffer"):
        rb = os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl")
        try:
            model.load_replay_buffer(rb)
        except Exception as e:  # noqa: BLE001
            venv.close()
            raise ConfigError(rb, "unreadable", f"the replay buffer kenv train saved with {path} "
                              f"({type(e).__name__}); delete this checkpoint's files to resume from an older one") \
                from None
    if state is not None:
        restore_rng(model, state)
    else:  # a checkpoint from before state files: fresh episodes, generators reseeded
        model.set_random_seed(seed + n)
        log(f"{path}: no state file; the environments restart fresh episodes (seeds {seed + n}+), "
            "so the resumed run is not identical to an uninterrupted one")
    return model, n, float(meta.wall_s)
