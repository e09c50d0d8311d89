"""``kenv benchmark``: the shipped SB3 algorithms on every id, over seeds, as one table.

    kenv benchmark [--envs ID,...] [--algos ppo,a2c,dqn] [--seeds N] [--out DIR] [--workers N]
                   [--ray ADDR] [--no-progress] [--n-timesteps N] [--json]

One job per (id, algo, seed), through the one job runner (:mod:`kenv.agents.jobs`):
train with the shipped config of that algo for that id (``configs/train/<algo>.yaml``,
the training run of :func:`kenv.agents.rediscover.seed_setup`), then evaluate the saved
model on the env's evaluation episodes (:data:`kenv.envs.scores.EVAL_EPISODES`
episodes, reset seeds 0.., profile ``balanced``: the episodes of the normalised score),
recording each episode (:class:`kenv.RecordEpisodes`, which ``kenv validate`` replays).
DQN runs only where the action space is Discrete; an (id, algo) without a shipped
config block, or whose space the algo cannot drive, is skipped and said so (``skipped``).

The table: per id and algo, the mean return over seeds (each seed's return is its mean
over the evaluation episodes) +- the 95% interval over seeds (Student t, ``ci95``) and
the normalised score of that mean (:func:`kenv.normalized_score`: 0 random, 100 the
context oracle), beside the rows ``random`` and ``oracle`` (the two ends of the scale,
:data:`kenv.envs.scores.REFERENCE_RETURNS`) and ``patched`` (the patch, evaluated here
on the same episodes, where the id has one).  Baseline rows are one deterministic policy
each: no interval over seeds.

Output (``--out``, default ``runs/benchmark``), every file written by the driver,
atomically, under ``<out>/.lock``:
    ``<algo>/<env>/seed_<n>/``              the training run (agents/train.py)
    ``<algo>/<env>/seed_<n>/records.jsonl``  the evaluation episodes' records
    ``<algo>/<env>/seed_<n>/bench.json``     the job's result (the mark of a finished job)
    ``benchmark.json``, ``benchmark.md``     the table (JSON; markdown)

Resuming: a rerun with the same ``--out`` and flags redoes no finished job (``bench.json``
with this run's fingerprint and its records file: :func:`kenv.agents.jobs.cached_doc`, as
rediscover) and resumes a partial training run from its checkpoint; the table is the same.
A ``bench.json`` that is not what this job writes (:func:`cached_bench`: a value of another
type, a mean that is not its returns', returns other than its records file's or its
model's on the evaluation episodes) is redone and said so, never put in the table.

``--json`` keys (kept stable): ``rows`` (per id, then the trained algos and the baselines:
``env``, ``policy``, ``kind`` ``trained``/``baseline``, ``seeds``, ``return_mean``,
``return_ci95`` (None for a baseline or one seed), ``score``, ``seed_returns``, ``steps``
(the env steps trained; None for a baseline), ``records`` (the records files)), ``skipped``
(``env``, ``algo``, ``why``), ``algos``, ``seeds``, ``eval_episodes``, ``profile``,
``n_timesteps`` (None: the shipped budgets), ``out``, ``markdown`` (the table), ``wall_s``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable, Mapping, Sequence


from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kenv.envs.registration import BENCHMARK_IDS, RENAMED, check_env_id
from kenv.envs.scores import EVAL_EPISODES, REFERENCE_POLICY, REFERENCE_RETURNS, SCORE_PROFILE, normalized_score
from kenv.errors import ConfigError
from kenv.schema import check_choice, check_int, cli_integer

from .config import ALGO_NAMES, MAX_TIMESTEPS, load_train_config
from .estimate import announce, train_s
from .evaluate import ci95, evaluate
from .files import DirLock, atomic_write_bytes, atomic_write_json, atomic_write_text, env_slug, make_out_dir, \
    remove_stale_tmp
from .jobs import Job, check_cached, check_ray, check_workers, job_dir, read_tree, run_jobs, write_cached_doc, \
    write_tree
from .rediscover import MAX_SEEDS, check_seed_runs, seed_setup
from .train import configure_torch, fingerprint, train

DEFAULT_OUT = os.path.join("runs", "benchmark")
DEFAULT_ALGOS = ALGO_NAMES
#: the keys of a finished job's bench.json; a file without them is redone
BENCH_KEYS = ("env", "algo", "seed", "fingerprint", "steps", "returns", "return_mean", "train_wall_s")
RECORDS = "records.jsonl"


class BenchDoc(BaseModel):
    """The values of a finished job's ``bench.json`` that the table reads, by type."""

    model_config = ConfigDict(strict=True, extra="allow")
    env: str
    algo: str
    seed: int
    fingerprint: str
    steps: int = Field(ge=0)
    returns: list[float] = Field(min_length=EVAL_EPISODES, max_length=EVAL_EPISODES)
    return_mean: float = Field(allow_inf_nan=False)
    train_wall_s: float = Field(ge=0, allow_inf_nan=False)


def cached_bench(run_dir: str, env_id: str, algo: str, seed: int, fp: str) -> tuple[dict | None, str]:
    """(``bench.json`` of the finished job (env_id, algo, seed) in ``run_dir``, "") if it is
    this job's for the fingerprint ``fp``, its values of the types written, its mean its
    returns' and its returns those of its records file, which passes ``kenv validate
    --strict`` (the evaluation episodes, each once), and of its ``model.zip`` played on
    them; else (None, why it is redone, "" when there is no finished job there)."""
    doc, why = check_cached(os.path.join(run_dir, "bench.json"), BENCH_KEYS, fp)
    records = os.path.join(run_dir, RECORDS)
    if doc is None or not os.path.isfile(records):
        return None, why
    try:
        d = BenchDoc.model_validate(doc)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        return None, f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    if (d.env, d.algo, d.seed) != (env_id, algo, seed):
        return None, f"it is the result of {d.env} {d.algo} seed {d.seed}"
    if not all(math.isfinite(r) for r in d.returns) or \
            not math.isclose(d.return_mean, math.fsum(d.returns) / len(d.returns), rel_tol=1e-9, abs_tol=1e-12):
        return None, "return_mean is not the mean of its returns"
    try:
        with open(records, encoding="utf-8") as f:
            rec = [json.loads(line).get("return") for line in f if line.strip()]
    except (OSError, ValueError, AttributeError):
        rec = None
    if rec != d.returns:
        return None, f"its returns are not those of {RECORDS}"
    from kenv.envs.validate import validate   # (returns edited in both files agree: replay them)

    try:
        res = validate(records, strict=True)
    except (ConfigError, OSError) as e:
        return None, f"{RECORDS}: {e}"
    bad = next(((n, m) for n, ok, m in res.lines if not ok), None)
    if bad is not None:
        return None, f"{RECORDS} fails kenv validate --strict: line {bad[0]}: {bad[1]}"
    # (a complete row, and no other id's: no failed line, seeds 0..9 each once, so the 10 lines)
    if [(r.env_id, r.complete) for r in res.rows] != [(env_id, True)]:
        return None, (f"{RECORDS} is not the {EVAL_EPISODES} evaluation episodes of {env_id} "
                      f"(seeds 0..{EVAL_EPISODES - 1})")
    # (the episodes replay, but whose are they? another policy's of this id, bench.json edited alike,
    # passed: the job's model plays them again, as bench_job did; read without unpickling)
    configure_torch()   # (one thread, as the job that played them: the same arithmetic)
    try:
        ev = evaluate(env_id, [], episodes=EVAL_EPISODES, seed=0, profile=SCORE_PROFILE, model=run_dir)
    except (ConfigError, OSError) as e:
        return None, f"its model: {' '.join(str(e).split())}"
    if [list(p.returns) for p in ev.policies] != [d.returns]:
        return None, f"its returns are not its model.zip's on the evaluation episodes ({RECORDS} of another policy?)"
    return doc, ""


def _run_dir(out: str, env_id: str, algo: str, seed: int) -> str:
    return os.path.join(out, algo, env_slug(env_id), f"seed_{seed}")


def _setup(env_id: str, algo: str, seed: int, out: str, n_timesteps: int | None):
    """The training run of one job: rediscover's, with the algo's shipped config, under ``<out>/<algo>``."""
    return seed_setup(env_id, seed, algo, algo, os.path.join(out, algo), n_timesteps)


def bench_job(env_id: str, algo: str, seed: int, n_timesteps: int | None = None, run_dir: str | None = None,
              prior: dict[str, bytes] | None = None) -> dict:
    """Train (or resume) one (id, algo, seed), then evaluate the saved model on the
    evaluation episodes, recorded.  Returns ``{"doc": bench.json, "records": the records
    file's bytes, "files": the run's files, or None when in run_dir}``; the driver writes them."""
    with job_dir(run_dir, prior) as d:
        cfg, targs = _setup(env_id, algo, seed, "", n_timesteps)
        targs = replace(targs, out=d)
        fp = fingerprint(cfg, seed, targs)
        res = train(targs, cfg, log=lambda s: None)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="kenv-bench-") as tmp:
            path = os.path.join(tmp, RECORDS)
            ev = evaluate(env_id, [], episodes=EVAL_EPISODES, seed=0, profile=SCORE_PROFILE, model=d, record=path)
            with open(path, "rb") as f:
                records = f.read()
        [p] = ev.policies
        doc = {"env": env_id, "algo": algo, "seed": seed, "fingerprint": fp, "steps": res.steps,
               "returns": list(p.returns), "return_mean": p.return_mean, "train_wall_s": res.wall_s,
               "eval_wall_s": time.perf_counter() - t0}
        return {"doc": doc, "records": records, "files": None if run_dir is not None else read_tree(d)}


def patched_return(env_id: str) -> float | None:
    """The patch's mean return on the evaluation episodes, None where the id has no patch."""
    ev = evaluate(env_id, ["patched"], episodes=EVAL_EPISODES, seed=0, profile=SCORE_PROFILE)
    return ev.policies[0].return_mean if ev.policies else None


def plan(env_ids: Sequence[str], algos: Sequence[str]) -> tuple[list[tuple[str, str]], list[dict]]:
    """The (id, algo) pairs to run, and the skipped ones with why (no shipped config block,
    or an action space the algo cannot drive: DQN needs Discrete)."""
    pairs, skipped = [], []
    for e in env_ids:
        for a in algos:
            try:
                load_train_config(a, e, a)
            except ConfigError as err:
                skipped.append({"env": e, "algo": a, "why": " ".join(str(err).split())})
                continue
            pairs.append((e, a))
    return pairs, skipped


def _parse_list(value, flag: str, allowed: Sequence[str], renamed: Mapping[str, str] = MappingProxyType({})) -> list[str]:
    """The comma-separated (or listed) items of ``value``, each in ``allowed`` (an old name of
    ``renamed``: its new one), once each."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    items = [renamed.get(i, i) for i in (str(i).strip() for i in items)]
    if not items or any(not i for i in items):
        raise ConfigError(flag, value, "a comma-separated list of " + ", ".join(allowed))
    for i in items:
        check_choice(i, flag, tuple(allowed))
    return list(dict.fromkeys(items))


def benchmark(envs: Sequence[str] | str | None = None, algos: Sequence[str] | str | None = None, seeds: int = 5,
              out: str = DEFAULT_OUT, workers: int | None = None, ray: str | None = None,
              n_timesteps: int | None = None, progress: str | None = None,
              log: Callable[[str], None] | None = None) -> "BenchmarkResult":
    """Run (or resume) the benchmark; see the module docstring."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    env_ids = list(BENCHMARK_IDS) if envs is None else _parse_list(envs, "--envs", BENCHMARK_IDS, RENAMED)
    for e in env_ids:
        check_env_id(e, "--envs")
    algo_list = list(DEFAULT_ALGOS) if algos is None else _parse_list(algos, "--algos", ALGO_NAMES)
    check_int(seeds, "--seeds", 1, MAX_SEEDS)
    check_int(n_timesteps, "--n-timesteps", 1, MAX_TIMESTEPS, optional=True)
    workers = check_workers(workers)
    check_ray(ray)
    pairs, skipped = plan(env_ids, algo_list)
    make_out_dir(out, "--out")
    with DirLock(out, "--out"):
        remove_stale_tmp(out)
        for a in algo_list:
            check_seed_runs([e for e, a2 in pairs if a2 == a], range(seeds), a, a, os.path.join(out, a), n_timesteps,
                            given_out=out, flags="the --n-timesteps and shipped training configs")
        announce("kenv benchmark", seeds * sum(train_s(e, n_timesteps or load_train_config(a, e, a).n_timesteps)
                                               for e, a in pairs), log)
        results: dict[tuple, dict] = {}
        jobs = []
        for s in range(seeds):
            for e, a in pairs:
                d = _run_dir(out, e, a, s)
                cfg, targs = _setup(e, a, s, out, n_timesteps)
                doc, why = cached_bench(d, e, a, s, fingerprint(cfg, s, targs))
                if doc is not None:
                    results[(e, a, s)] = doc
                    continue
                if why:
                    log(f"kenv benchmark: {os.path.join(d, 'bench.json')} is not this job's result ({why}): redone")
                where = (d, None) if ray is None else (None, read_tree(d) if os.path.isdir(d) else None)
                jobs.append(Job((e, a, s), bench_job, (e, a, s, n_timesteps, *where)))
        if results:
            log(f"kenv benchmark: {len(results)} finished job(s) in {out} kept; {len(jobs)} to run")

        def on_done(job: Job, res: dict) -> list[Job]:
            e, a, s = job.key
            d = _run_dir(out, e, a, s)
            if res["files"] is not None:
                write_tree(d, res["files"])
            atomic_write_bytes(os.path.join(d, RECORDS), res["records"])
            write_cached_doc(os.path.join(d, "bench.json"), res["doc"])   # last: the mark of a finished job
            results[job.key] = res["doc"]
            log(f"{e} {a} seed {s}: return {res['doc']['return_mean']:.3f}, {res['doc']['steps']} steps, "
                f"train {res['doc']['train_wall_s']:.1f}s")
            return []

        run_jobs(jobs, on_done, workers=workers, ray=ray, progress=progress)
        rows = build_rows(env_ids, algo_list, range(seeds), pairs, results, out)
        result = BenchmarkResult(rows, skipped, algo_list, seeds, n_timesteps, out, time.perf_counter() - t0)
        doc = result.to_dict()
        atomic_write_json(os.path.join(out, "benchmark.json"), doc)
        atomic_write_text(os.path.join(out, "benchmark.md"), doc["markdown"])
        return result


def build_rows(env_ids, algos, seeds, pairs, results, out) -> list[dict]:
    """Per id: a row per trained algo (over seeds), then random, patched and oracle."""
    rows = []
    for e in env_ids:
        for a in algos:
            if (e, a) not in pairs:
                continue
            means = [results[(e, a, s)]["return_mean"] for s in seeds]
            rows.append({"env": e, "policy": a, "kind": "trained", "seeds": len(means),
                         "return_mean": sum(means) / len(means), "return_ci95": ci95(means) if len(means) > 1 else None,
                         "score": normalized_score(e, means), "seed_returns": means,
                         "steps": results[(e, a, seeds[0])]["steps"],
                         "records": [os.path.join(_run_dir(out, e, a, s), RECORDS) for s in seeds]})
        lo, hi = REFERENCE_RETURNS[e]
        base = [("random", lo), ("patched", patched_return(e)), (REFERENCE_POLICY, hi)]
        rows += [{"env": e, "policy": n, "kind": "baseline", "seeds": None, "return_mean": r, "return_ci95": None,
                  "score": normalized_score(e, r), "seed_returns": None, "steps": None, "records": []}
                 for n, r in base if r is not None]
    return rows


@dataclass
class BenchmarkResult:
    rows: list[dict]
    skipped: list[dict]
    algos: list[str]
    seeds: int
    n_timesteps: int | None
    out: str
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"rows": self.rows, "skipped": self.skipped, "algos": self.algos, "seeds": self.seeds,
                "eval_episodes": EVAL_EPISODES, "profile": SCORE_PROFILE, "n_timesteps": self.n_timesteps,
                "out": self.out, "markdown": self.markdown(), "wall_s": self.wall_s}

    def markdown(self) -> str:
        budget = "the shipped budgets" if self.n_timesteps is None else f"--n-timesteps {self.n_timesteps}"
        lines = [f"Seeds 0..{self.seeds - 1}, {budget}; return: mean over seeds of each seed's mean over the "
                 f"{EVAL_EPISODES} evaluation episodes (profile {SCORE_PROFILE}), ± the 95% t interval over seeds; "
                 f"score: 0 = random, 100 = {REFERENCE_POLICY}.", "",
                 "| env | policy | seeds | return (mean ± 95% CI) | score | steps |",
                 "|---|---|---:|---:|---:|---:|"]
        for r in self.rows:
            ret = f"{r['return_mean']:.3f}" + (f" ± {r['return_ci95']:.3f}" if r["return_ci95"] is not None else "")
            lines.append(f"| {r['env']} | {r['policy']} | {r['seeds'] or '-'} | {ret} | {r['score']:.1f} | "
                         f"{r['steps'] or '-'} |")
        if self.skipped:
            lines += ["", "Skipped:"] + [f"- {s['env']} {s['algo']}: {s['why']}" for s in self.skipped]
        return "\n".join(lines) + "\n"

    def format_text(self) -> str:
        return self.markdown() + f"\n{self.out}: benchmark.md, benchmark.json; wall time {self.wall_s:.1f}s"


# ------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    p.add_argument("--envs", default=None, metavar="ID,...", help="env ids, comma-separated (default: every "
                   "benchmark id: all registered ids but discover's controls)")
    p.add_argument("--algos", default=None, metavar="ALGO,...",
                   help="ppo, a2c, dqn, comma-separated (default all three; DQN where the space is Discrete)")
    p.add_argument("--seeds", type=cli_integer, default=5, help="train seeds 0..N-1 per id and algo (default 5)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT}); "
                   "a rerun skips finished jobs and resumes a partial one")
    p.add_argument("--workers", type=cli_integer, default=None,
                   help="processes (default min(2, CPUs)); results do not depend on it")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="run the jobs as Ray tasks (needs kenv-gym[ray]; docs/scaling.md); --workers is then unused")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--n-timesteps", type=cli_integer, default=None,
                   help="override every config's n_timesteps: for tests and smoke runs only (the table is "
                        "for the shipped budgets)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def run_from_args(args) -> BenchmarkResult:
    try:
        return benchmark(args.envs, args.algos, args.seeds, args.out, args.workers, args.ray, args.n_timesteps,
                         progress=None if args.no_progress else "benchmark")
    except KeyboardInterrupt:
        print(f"kenv benchmark: interrupted; the same command resumes it (--out {args.out})", file=sys.stderr)
        raise SystemExit(130) from None
