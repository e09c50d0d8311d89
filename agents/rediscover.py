"""``kenv rediscover``: does an agent trained with the shipped config find the patch?

    kenv rediscover [--envs ID ...] [--seeds N] [--out DIR] [--workers W] [--ray auto|ADDRESS] [--json]

For each env (default: every registered ``kenv/*`` id) and each seed 0..N-1:

1. train with the shipped config (``configs/train/ppo.yaml``, :mod:`kenv.agents.train`)
   into ``<out>/<env>/seed_<n>/``;
2. evaluate the saved model (read back from ``model.zip``) beside the baselines
   (:mod:`kenv.agents.evaluate`) on the same seeded episodes;
3. find the action the learned policy takes in every scenario context of the env's
   mix (deterministic policy, each context forced with ``reset(options={"scenario": ctx})``);
4. judge it against the patch, where the choice matters.

When does the choice matter?
    For every context of the mix and every static action, ``TABLE_EPISODES`` seeded
    episodes give a mean return and its 95% interval (Student t, ``ci95``); the same
    table gives the oracle (best static action per context).  The choice matters in a
    context when the patched action beats every other static action by more than the
    noise, paired by episode (every action meets the same seeds, and the same phase
    schedules where the env has phases): ``mean(d) > ci95(d) + 1% x max(1,
    |mean(patched)|, |mean(other)|)``, ``d`` the per-episode differences patched -
    other.  For a MultiDiscrete env (kenv/Kernel-v3)
    each decision is judged on its own: "other" ranges over the actions that differ from
    the patched combination in that decision only.  Where the choice does not matter
    (a tie, or another action better: the trade-off contexts) any learned choice is fine;
    they are reported, not judged.

What did the agent learn, and does it match?
    The learned choice in a context is what the deterministic policy does there over
    ``CHOICE_EPISODES`` seeded episodes: per decision, the value it takes most often
    (and its share of the steps).  A decision that matters in a context matches when
    (a) that value is the patched one, and (b) forcing the patched value into the
    learned policy at every step gains nothing beyond the noise (paired episodes: mean
    gain <= its 95% interval + 1% of the return).  (b) judges the choice only where it
    matters *within* an episode too: after the raid6 benchmark has finished, or while a
    reader sleeps, a decision has no effect and any value is fine.  A row matches when
    every decision that matters matches in every context.  An env where the choice
    matters nowhere gets ``match: false`` and a note: nothing was rediscovered.

The three-valued verdict (``verdict``, per decision, context and row):
    ``patched`` where the decision matches as above; ``beyond`` where the learned
    policy mostly takes another value and that value beats the patch by a paired test
    on the same episodes (forcing the patched value in loses, and the 95% interval of
    the paired differences excludes zero: :func:`decision_verdict`); ``missed``
    otherwise.  A context's and a row's verdict is the worst of its judged ones; a row
    succeeds (``success``) when every context that matters is patched or beyond, and
    ``beyond`` names each such choice and context (``choice``, ``context``,
    ``gain_over_patch``).  ``match`` keeps its meaning (patched everywhere).

Output (``--out``, default ``runs/rediscover``), every file written atomically:
    ``<env>/baselines.json``          static-action table, context verdicts, baselines
    ``<env>/seed_<n>/``               the training run (see agents/train.py) + ``learned.json``
    ``<env>_learning_curve.png``      evaluation return vs env steps per seed, baselines as lines
    ``<env>_reward_components.png``   each policy's return split into reward components
    ``rediscover.json``               the table as JSON (also printed with ``--json``)

Resuming: a rerun with the same ``--out`` skips what is finished (``learned.json``,
``baselines.json``; a damaged or foreign one is recomputed), resumes a partial training
run from its newest checkpoint, and gives the same table: a training run resumes
exactly (checkpoints at rollout boundaries hold the environments mid-episode and the
random generators, see agents/train.py), so the steps, models, returns and verdicts are
those of an uninterrupted run; only ``wall_s`` differs.  Determinism: every random
source is seeded (SB3 ``seed=``, env seeds, torch single-threaded), so the same seed
gives the same table in a fresh directory too (``wall_s`` aside).

One run per ``--out`` at a time: ``<out>/.lock`` (``flock``) refuses a second one,
naming the PID of the first.  The worker processes die with the run, ``kill -9``
included (Linux ``PR_SET_PDEATHSIG``, and a watchdog thread on the parent PID);
Ctrl-C stops them and exits with status 130 (the runner: :mod:`kenv.agents.jobs`).

Work and time: the jobs (one per env and seed, one per context of each env's
static-action table, then one per env for the oracle and baselines) run in ``--workers``
spawned processes (default ``min(2, CPUs)``), one torch thread each; the results do not
depend on the number of workers.  With the defaults (one seed, four envs) a run takes
about a minute on a 2-core machine; ``wall_s`` of a row is that seed's training and
evaluation time, measured while the other worker runs.

``--json`` keys (read by users' scripts; kept stable): ``{"rows": [{"env", "patched",
"learned", "match", "return_learned", "return_patched", "return_oracle", "steps",
"wall_s", "verdict", "success", "beyond", ...}], ...}``; ``learned`` maps a context
label to the learned choice.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

import kenv
from kenv.envs.registration import check_env_id
from kenv.envs.reward import COMPONENTS, SIGN
from kenv.errors import ConfigError
from kenv.schema import check_int, cli_integer

from .baselines import OraclePolicy, Policy, StaticPolicy, context_key, make_policy, run_episode, static_actions
from .evaluate import ci95, evaluate, evaluate_policy
from .checkpoints import read_evaluations
from .config import MAX_TIMESTEPS, load_train_config, make_env, registered_env_ids
from .jobs import Job, cached_doc, check_ray, check_workers, job_dir, read_tree, run_jobs, write_cached_doc, \
    write_tree
from .files import (
    DirLock, atomic_write_json, atomic_write_text, env_slug, json_default, make_out_dir, remove_stale_tmp,
)
from .estimate import announce, train_s
from .policy import EVAL_SEED, SUMMARY_SEED, ModelPolicy, action_key, context_label, load_model, policy_summary, \
    varying_fields
from .train import TrainArgs, TrainConfig, check_resumable, fingerprint, rollout_steps, steps_to_train, train

DEFAULT_CONFIG = "ppo"
DEFAULT_OUT = os.path.join("runs", "rediscover")
#: evaluation episodes (seeds EVAL_SEED + i) for the learned policy and the baselines
EVAL_EPISODES = 20
#: the learning curves' evaluations: the first CURVE_EPISODES of those episodes
CURVE_EPISODES = 10
#: episodes per (context, static action) for the matter verdicts and the oracle
TABLE_EPISODES = 5
TABLE_SEED = 10_000
#: episodes per context for the learned choice and its counterfactual
CHOICE_EPISODES = 3
#: the margin beyond the 95% intervals, relative to the return
REL_MARGIN = 0.01
BASELINE_NAMES = ("original", "pre_patch", "patched", "random")
#: bound of --seeds (far beyond a useful run; a job list stays small)
MAX_SEEDS = 1000


# ------------------------------------------------------------------ static table
def static_table_context(env, ctx: dict, fields: list[str], episodes: int = TABLE_EPISODES,
                         seed: int = TABLE_SEED) -> dict:
    """One context of the static table: every static action's returns over ``episodes``
    seeded episodes (JSON-ready)."""
    base = env.unwrapped
    rows = {}
    for a in static_actions(env):
        pol = StaticPolicy("static", a)
        rets = [run_episode(env, pol, seed + i, {"scenario": ctx})[0] for i in range(episodes)]
        rows[base.action_label(a)] = {"action": list(action_key(a)), "returns": rets,
                                      "mean": float(np.mean(rets)), "ci95": ci95(rets)}
    return {"context": context_label(ctx, fields), "scenario": {f: ctx[f] for f in fields},
            "full_scenario": ctx, "actions": rows}


def static_table(env, episodes: int = TABLE_EPISODES, seed: int = TABLE_SEED) -> dict:
    """Per context of the mix and per static action: the returns of ``episodes`` seeded
    episodes (the oracle's exhaustive search, kept with its per-episode returns)."""
    check_int(episodes, "table episodes", 2, allowed="an integer >= 2 (for a 95% interval)")
    fields = varying_fields(env)
    return {"fields": fields, "episodes": episodes, "seed": seed,
            "contexts": [static_table_context(env, ctx, fields, episodes, seed)
                         for ctx in env.unwrapped.mix.contexts()]}


def _beats(p: dict, o: dict) -> tuple[bool, float]:
    """(p beats o beyond the noise margin, the margin): paired by episode, the 95%
    interval of the per-episode differences (the rows' ``returns`` share seeds)."""
    d = np.asarray(p["returns"], dtype=float) - np.asarray(o["returns"], dtype=float)
    margin = ci95(d) + REL_MARGIN * max(1.0, abs(p["mean"]), abs(o["mean"]))
    return float(d.mean()) > margin, margin


def judge_contexts(table: dict, patched: Sequence[int]) -> list[dict]:
    """Per context and per decision (action dimension): does the patched value matter?

    verdict: ``patched`` (it beats every alternative beyond the noise), ``tie``, or
    ``<label> better`` (an alternative beats it: a trade-off context).
    """
    patched = tuple(patched)
    out = []
    for c in table["contexts"]:
        rows = c["actions"]
        by_idx = {tuple(r["action"]): (label, r) for label, r in rows.items()}
        p_label, p = by_idx[patched]
        dims = []
        for d in range(len(patched)):
            alts = [(lab, r) for idx, (lab, r) in by_idx.items()
                    if idx[d] != patched[d] and all(idx[j] == patched[j] for j in range(len(patched)) if j != d)]
            if not alts:
                dims.append({"matters": False, "verdict": "no alternative", "best_other": None})
                continue
            wins = [_beats(p, r)[0] for _, r in alts]
            best_lab, best = max(alts, key=lambda t: t[1]["mean"])
            if all(wins):
                verdict = "patched"
            elif _beats(best, p)[0]:
                verdict = f"{best_lab} better"
            else:
                verdict = "tie"
            dims.append({"matters": verdict == "patched", "verdict": verdict, "best_other": best_lab,
                         "best_other_mean": best["mean"], "best_other_ci95": best["ci95"],
                         "margin": _beats(p, best)[1]})
        oracle_label = max(rows, key=lambda lab: rows[lab]["mean"])
        out.append({"context": c["context"], "scenario": c["scenario"], "patched_mean": p["mean"],
                    "patched_ci95": p["ci95"], "oracle": oracle_label, "oracle_mean": rows[oracle_label]["mean"],
                    "dims": dims, "matters": any(d["matters"] for d in dims)})
    return out


def oracle_from_table(env, table: dict) -> OraclePolicy:
    """The oracle baseline (best static action per context) from the static table."""
    import gymnasium as gym

    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    fields = table["fields"]
    choice, returns = {}, {}
    for c in table["contexts"]:
        key = context_key(c["full_scenario"], fields)
        best = max(c["actions"].values(), key=lambda r: r["mean"])
        choice[key] = int(best["action"][0]) if discrete else np.array(best["action"], dtype=np.int64)
        returns[key] = {lab: list(r["returns"]) for lab, r in c["actions"].items()}
    return OraclePolicy(fields=fields, table=choice, returns=returns)


class ForcedPolicy(Policy):
    """``inner`` with one action dimension forced to ``value`` (the counterfactual of the
    match test); for a Discrete env, the static action ``value``."""

    def __init__(self, inner: Policy, dim: int, value: int, discrete: bool):
        self.inner, self.dim, self.value, self.discrete = inner, dim, int(value), discrete
        self.name = f"{inner.name}+forced[{dim}]"

    def reset(self, env, obs, info):
        self.inner.reset(env, obs, info)

    def act(self, obs, info):
        if self.discrete:
            return self.value
        a = np.array(self.inner.act(obs, info), dtype=np.int64, copy=True)
        a[self.dim] = self.value
        return a


# ------------------------------------------------------------------------- jobs
def _env_kwargs(cfg) -> tuple[str, dict]:
    kw = dict(cfg.env_kwargs)
    return kw.pop("profile", "balanced"), kw


def baseline_fingerprint(cfg) -> str:
    env = make_env(cfg)
    base = env.unwrapped
    shape = {"contexts": [context_label(c, varying_fields(env)) for c in base.mix.contexts()],
             "actions": [base.action_label(a) for a in static_actions(env)]}
    env.close()
    doc = {"env": cfg.env_id, "env_kwargs": cfg.env_kwargs, "table": [TABLE_EPISODES, TABLE_SEED],
           "eval": [EVAL_EPISODES, EVAL_SEED], "kenv": kenv.__version__, "shape": shape}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _baselines_path(out: str, env_id: str) -> str:
    return os.path.join(out, env_slug(env_id), "baselines.json")


#: the keys of the cached job results; a file without them (damaged, foreign, older) is
#: recomputed, which loses nothing: both are functions of the finished runs and the seeds
BASELINES_KEYS = ("env", "fingerprint", "patched", "patched_action", "profile", "signed_weights", "evaluation",
                  "contexts", "table", "wall_s")
LEARNED_KEYS = ("env", "seed", "algo", "fingerprint", "steps", "train_wall_s", "eval_wall_s", "return_mean",
                "return_ci95", "returns", "components", "choices")


def cached_baselines(env_id: str, config: str, algo: str | None, out: str) -> dict | None:
    cfg = load_train_config(config, env_id, algo)
    cached = cached_doc(_baselines_path(out, env_id), BASELINES_KEYS, baseline_fingerprint(cfg))
    return cached


def table_job(env_id: str, config: str, algo: str | None, index: int) -> dict:
    """Context ``index`` of the env's static table (the table is split by context so
    that the workers share the exhaustive search)."""
    cfg = load_train_config(config, env_id, algo)
    env = make_env(cfg)
    t0 = time.perf_counter()
    ctx = env.unwrapped.mix.contexts()[index]
    row = static_table_context(env, ctx, varying_fields(env))
    env.close()
    return {"index": index, "row": row, "wall_s": time.perf_counter() - t0}


def baseline_job(env_id: str, config: str, algo: str | None, rows: list[dict] | None = None,
                 table_wall_s: float = 0.0) -> dict:
    """Context verdicts, oracle and baselines for one env, from the static table's rows
    (computed here when ``rows`` is None); the driver caches it in ``<out>/<env>/baselines.json``."""
    cfg = load_train_config(config, env_id, algo)
    t0 = time.perf_counter()
    env = make_env(cfg)
    base = env.unwrapped
    if rows is None:
        table = static_table(env)
    else:
        table = {"fields": varying_fields(env), "episodes": TABLE_EPISODES, "seed": TABLE_SEED, "contexts": rows}
    patched_action = make_policy("patched", env).action
    verdicts = judge_contexts(table, action_key(patched_action))
    oracle = oracle_from_table(env, table)
    profile, kw = _env_kwargs(cfg)
    ev = evaluate(env_id, list(BASELINE_NAMES), episodes=EVAL_EPISODES, seed=EVAL_SEED, profile=profile,
                  env_kwargs=kw, extra={"oracle": oracle})
    weights = {c: SIGN[c] * base.profile.weights[c] for c in COMPONENTS}
    evaluation = ev.to_dict()
    returns = {p.name: list(p.returns) for p in ev.policies}
    for p in evaluation["policies"]:
        p["returns"] = returns[p["name"]]
    doc = {"env": env_id, "fingerprint": baseline_fingerprint(cfg), "patched": base.action_label(patched_action),
           "patched_action": list(action_key(patched_action)), "profile": base.profile.name,
           "signed_weights": weights, "evaluation": evaluation, "contexts": verdicts, "table": table,
           "wall_s": table_wall_s + time.perf_counter() - t0}
    env.close()
    return doc


def learned_choices(env, learned: Policy, summary: list[dict] | None = None) -> list[dict]:
    """The learned policy's choice per context (:func:`kenv.agents.train.policy_summary`, or
    ``summary`` if already computed) with, per decision, the returns of the same episodes
    with that decision forced to the patched value (``forced_returns``)."""
    import gymnasium as gym

    if summary is None:
        summary = policy_summary(env, learned, episodes=CHOICE_EPISODES)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    patched = action_key(make_policy("patched", env).action)
    contexts = env.unwrapped.mix.contexts()
    assert [c["context"] for c in summary] == [context_label(c, varying_fields(env)) for c in contexts]
    for ctx, ch in zip(contexts, summary):
        ch["forced_returns"] = []
        for d, value in enumerate(patched):
            pol = ForcedPolicy(learned, d, value, discrete)
            ch["forced_returns"].append([run_episode(env, pol, SUMMARY_SEED + i, {"scenario": ctx})[0]
                                         for i in range(len(ch["returns"]))])
    return summary


def seed_setup(env_id: str, seed: int, config: str, algo: str | None, out: str,
               n_timesteps: int | None = None) -> tuple[TrainConfig, TrainArgs]:
    """The training run of one (env, seed): its config and arguments (``<out>/<env>/seed_<seed>``)."""
    cfg = load_train_config(config, env_id, algo)
    if n_timesteps is not None:
        cfg.n_timesteps = int(n_timesteps)
    run_dir = os.path.join(out, env_slug(env_id), f"seed_{seed}")
    return cfg, TrainArgs(config=config, env=env_id, algo=cfg.algo, seed=seed, out=run_dir, resume=True,
                          eval_episodes=CURVE_EPISODES, summary_episodes=CHOICE_EPISODES)


def check_seed_runs(env_ids: Sequence[str], seed_list: Sequence[int], config: str, algo: str | None, out: str,
                    n_timesteps: int | None, *, given_out: str | None = None,
                    flags: str = "the --config, --algo and --n-timesteps") -> None:
    """Refuse, before any work, a rerun whose training runs in ``out`` were made with other
    flags (train's own refusal, later, named --resume, which rediscover does not have).
    ``given_out`` is the --out as the user typed it, when ``out`` is a folder under it;
    ``flags`` says what a run's training depends on in the calling command."""
    for e in env_ids:
        for s in seed_list:
            cfg, targs = seed_setup(e, s, config, algo, out, n_timesteps)
            try:
                check_resumable(targs.out, fingerprint(cfg, s, targs))
            except ConfigError as err:
                if err.field != "--resume":
                    raise
                raise ConfigError("--out", given_out or out,
                                  f"a new directory, or {flags} of the run already there ({targs.out} was "
                                  "trained with others; delete that folder to redo its run)") from None


def _learned_path(out: str, env_id: str, seed: int) -> str:
    return os.path.join(out, env_slug(env_id), f"seed_{seed}", "learned.json")


def cached_learned(env_id: str, seed: int, config: str, algo: str | None, out: str,
                   n_timesteps: int | None = None) -> dict | None:
    """The finished seed's learned.json in ``out``, if it is one for this run (the driver's check)."""
    cfg, targs = seed_setup(env_id, seed, config, algo, out, n_timesteps)
    return cached_doc(_learned_path(out, env_id, seed), LEARNED_KEYS, fingerprint(cfg, seed, targs))


def seed_job(env_id: str, seed: int, config: str, algo: str | None, n_timesteps: int | None = None,
             run_dir: str | None = None, prior: dict[str, bytes] | None = None) -> dict:
    """Train (or resume) one seed, then evaluate the saved model: its return on the
    evaluation episodes, its choice per context, and per context and decision the return
    of the counterfactual policy with that decision forced to the patched value (on the
    same episodes).  The run is in ``run_dir``, or with None in a temporary directory
    holding ``prior`` (:func:`kenv.agents.jobs.job_dir`).  Returns ``{"doc": learned.json,
    "files": the run's files, or None when in run_dir}``; the driver writes them."""
    with job_dir(run_dir, prior) as d:
        cfg, targs = seed_setup(env_id, seed, config, algo, "", n_timesteps)
        targs = replace(targs, out=d)
        fp = fingerprint(cfg, seed, targs)
        res = train(targs, cfg, log=_quiet)
        t0 = time.perf_counter()
        env = make_env(cfg)
        model = load_model(d, cfg.algo, env=env)  # evaluation reads the saved model
        learned = ModelPolicy(model)
        ev = evaluate_policy(env, learned, EVAL_EPISODES, EVAL_SEED)
        # policy_summary() of the same (saved) model, CHOICE_EPISODES per context
        choices = learned_choices(env, learned, res.summary)
        env.close()
        doc = {"env": env_id, "seed": seed, "algo": cfg.algo, "fingerprint": fp, "steps": res.steps,
               "train_wall_s": res.wall_s, "eval_wall_s": time.perf_counter() - t0,
               "return_mean": ev.return_mean, "return_ci95": ev.return_ci95, "returns": list(ev.returns),
               "components": ev.component_means(), "choices": choices}
        return {"doc": doc, "files": None if run_dir is not None else read_tree(d)}


def overshoot_note(cfgs: dict, n_timesteps: int | None) -> str | None:
    """One line naming the envs whose budget (``--n-timesteps``, or the config's) is not
    whole rollouts, and the steps SB3 will train on each instead (kenv.agents.train)."""
    over = []
    for e, c in cfgs.items():
        c = replace(c, n_timesteps=c.n_timesteps if n_timesteps is None else n_timesteps)
        m = steps_to_train(c)
        if m is not None and m != c.n_timesteps:
            over.append(f"{e} {m:,} (rollout {rollout_steps(c):,})")
    if not over:
        return None
    asked = f"--n-timesteps {n_timesteps:,}" if n_timesteps is not None else "n_timesteps"
    return (f"{asked} is not a multiple of a rollout on every env; SB3 trains whole rollouts, so the runs "
            "will train: " + ", ".join(over) + " steps")


def _quiet(msg: str) -> None:
    pass


# ------------------------------------------------------------------- the table
@dataclass
class RediscoverResult:
    config: str
    algo: str
    seeds: list[int]
    out: str
    rows: list[dict]
    envs: dict = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._doc(), default=json_default))  # plain JSON types

    def _doc(self) -> dict:
        return {"rows": self.rows, "config": self.config, "algo": self.algo, "seeds": self.seeds,
                "out": self.out, "envs": self.envs, "wall_s": self.wall_s,
                "criteria": {"table_episodes": TABLE_EPISODES, "table_seed": TABLE_SEED, "rel_margin": REL_MARGIN,
                             "choice_episodes": CHOICE_EPISODES, "choice_seed": SUMMARY_SEED,
                             "eval_episodes": EVAL_EPISODES, "eval_seed": EVAL_SEED}}

    def format_text(self) -> str:
        lines = [f"kenv rediscover: {self.algo.upper()} with {self.config}, seeds {_seed_range(self.seeds)}, "
                 f"{EVAL_EPISODES} evaluation episodes (seeds {EVAL_SEED}+), out {self.out}", ""]
        head = (f"{'env':<28} {'seed':>4}  {'patched':<24} {'verdict':<8}  {'learned where it matters':<30} "
                f"{'return learned':>16} {'patched':>8} {'oracle':>8} {'steps':>7} {'wall_s':>7}")
        lines += [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r['env']:<28} {r['seed']:>4}  {_clip(r['patched'], 24):<24} {r['verdict'] or '-':<8}  "
                         f"{_clip(r['learned_where_it_matters'], 30):<30} "
                         f"{r['return_learned']:>8.3f} ± {r['return_learned_ci95']:<5.2f} "
                         f"{r['return_patched']:>8.3f} {r['return_oracle']:>8.3f} {r['steps']:>7} {r['wall_s']:>7.1f}")
        for r in self.rows:
            for b in r.get("beyond", []):
                lines.append(f"  {r['env']} seed {r['seed']}: beyond the patch: {b['choice']} (patch {b['patched']}) "
                             f"at {b['context']}, {b['gain_over_patch']:+.3f} ± {b['ci95']:.3f} paired")
        for env_id, e in self.envs.items():
            rows = [r for r in self.rows if r["env"] == env_id]
            lines += ["", f"{env_id}: the choice per scenario context (matters = the patched action beats every "
                          f"other static action by more than the 95% interval of the paired differences + {REL_MARGIN:.0%}; "
                          f"{TABLE_EPISODES} episodes each)"]
            w = max([len(c["context"]) for c in e["contexts"]] + [7])
            lines.append(f"{'context':<{w}}  {'verdict':<26} {'patched':>8} {'best other':>10}  "
                         + "  ".join(f"learned s{r['seed']}" for r in rows))
            by_ctx = [{lc["context"]: lc for lc in r["contexts"]} for r in rows]
            for c in e["contexts"]:
                verdict = "; ".join(d["verdict"] for d in c["dims"])
                other = max((d.get("best_other_mean", float("nan")) for d in c["dims"]), default=float("nan"))
                learned = []
                for bc in by_ctx:
                    lc = bc[c["context"]]
                    s = "patched" if lc["learned"] == e["patched"] else lc["learned"]
                    if lc["share"] < 0.995:
                        s += f" ({lc['share']:.0%})"
                    lv = lc.get("learned_verdict")
                    learned.append(s + ("" if lv is None else {"patched": " ok", "beyond": " BEYOND",
                                                               "missed": " MISS"}[lv]))
                lines.append(f"{c['context']:<{w}}  {_clip(verdict, 26):<26} {c['patched_mean']:>8.3f} "
                             f"{other:>10.3f}  " + "  ".join(learned))
            n_ok = sum(1 for r in rows if r["match"])
            n_succ = sum(1 for r in rows if r["success"])
            lines.append(f"{env_id}: patched choice ({e['patched']}) learned in {n_ok}/{len(rows)} seeds, "
                         f"patched or beyond in {n_succ}/{len(rows)}; "
                         f"the choice matters in {sum(c['matters'] for c in e['contexts'])}/{len(e['contexts'])} "
                         f"contexts; baselines and oracle search {e['baseline_wall_s']:.1f}s")
            for name in ("learning_curve", "reward_components"):
                if e.get(name):
                    lines.append(f"  {name.replace('_', ' ')}: {e[name]}")
        lines.append(f"\ntotal wall time {self.wall_s:.1f}s")
        return "\n".join(lines)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _seed_range(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])


#: the learned policy's verdict where a decision matters, best first
VERDICTS = ("patched", "beyond", "missed")


def decision_verdict(matters: bool, mode_is_patched: bool, gains: Sequence[float], match: bool | None) -> str | None:
    """The learned policy's verdict on one decision in one context (None where it does not matter).

    ``patched``: it matches (:func:`build_row`).  ``beyond``: it mostly takes another
    value, and that value beats the patch by a paired test on the same episodes: ``gains``
    are, per episode, the return with the patched value forced in minus the learned
    return, and their mean is below zero by more than its 95% interval (the interval of
    the paired differences excludes zero, in the learned choice's favour).  ``missed``:
    neither.
    """
    if not matters:
        return None
    if match:
        return "patched"
    g = np.asarray(gains, dtype=float)
    if not mode_is_patched and len(g) >= 2 and -g.mean() > np.nan_to_num(ci95(g)) and g.mean() < 0:
        return "beyond"
    return "missed"


def combine_verdicts(verdicts: Sequence[str | None]) -> str | None:
    """The verdict of a context (over its decisions) or a row (over its contexts): the
    worst of the judged ones (missed < beyond < patched); None if none is judged."""
    judged = [v for v in verdicts if v is not None]
    return max(judged, key=VERDICTS.index) if judged else None


def _choice_label(label: str, dim: int, n_dims: int) -> str:
    """The label of decision ``dim`` in an action label (``timer|hwrng_yield|...``)."""
    parts = label.split("|")
    return parts[dim] if len(parts) == n_dims else label


def build_row(base: dict, learned: dict) -> dict:
    """One table row: the learned choice per context, judged where the choice matters.

    A decision that matters in a context matches when (a) the patched value is the one the
    learned policy takes most often there, and (b) forcing the patched value into the
    learned policy gains nothing beyond the noise: the mean paired gain over the context's
    episodes is at most its 95% interval + 1% of the return.  (b) is what "wherever the
    choice matters" needs: steps where a decision has no effect (a finished benchmark, a
    reader asleep) may take any value without costing the match.
    """
    patched = tuple(base["patched_action"])
    verdicts = {v["context"]: v for v in base["contexts"]}
    contexts, learned_map, where, beyond = [], {}, [], []
    for ch in learned["choices"]:
        v = verdicts.get(ch["context"])
        if v is None:
            raise RuntimeError(f"{base['env']}: context {ch['context']!r} is not in baselines.json "
                               "(the env's scenario mix changed: use a new --out)")
        dims = []
        for d, p in enumerate(patched):
            counts = ch["dim_counts"][d]
            n_p = counts.get(str(p), counts.get(p, 0))
            gains = [f - r for f, r in zip(ch["forced_returns"][d], ch["returns"])]
            gain = float(np.mean(gains))
            noise = np.nan_to_num(ci95(gains)) + REL_MARGIN * max(1.0, abs(float(np.mean(ch["returns"]))))
            mode_ok = bool(ch["action_index"][d] == p)
            matters = v["dims"][d]["matters"]
            match = bool(mode_ok and gain <= noise) if matters else None
            dims.append({"patched_share": n_p / ch["steps"], "mode_is_patched": mode_ok, "forcing_gain": gain,
                         "noise": float(noise), "matters": matters, "match": match,
                         "learned_verdict": decision_verdict(matters, mode_ok, gains, match),
                         "choice": _choice_label(ch["action"], d, len(patched))})
        judged = [x["match"] for x in dims if x["match"] is not None]
        ctx_verdict = combine_verdicts([x["learned_verdict"] for x in dims])
        contexts.append({"context": ch["context"], "learned": ch["action"], "share": ch["share"],
                         "matters": v["matters"], "verdict": "; ".join(x["verdict"] for x in v["dims"]),
                         "match": all(judged) if judged else None, "dims": dims,
                         "learned_verdict": ctx_verdict,
                         "return_learned": float(np.mean(ch["returns"]))})
        beyond += [{"context": ch["context"], "decision": d, "choice": x["choice"],
                    "patched": _choice_label(base["patched"], d, len(patched)), "gain_over_patch": -x["forcing_gain"],
                    "ci95": float(np.nan_to_num(ci95([r - f for r, f in zip(ch["returns"], ch["forced_returns"][d])])))}
                   for d, x in enumerate(dims) if x["learned_verdict"] == "beyond"]
        learned_map[ch["context"]] = ch["action"]
        if v["matters"]:
            where.append(ch["action"])
    judged = [c["match"] for c in contexts if c["match"] is not None]
    verdict = combine_verdicts([c["learned_verdict"] for c in contexts])
    ev = {p["name"]: p for p in base["evaluation"]["policies"]}
    counts: dict[str, int] = {}
    for a in where:
        counts[a] = counts.get(a, 0) + 1
    summary = ", ".join(f"{a} {n}/{len(where)}" for a, n in sorted(counts.items(), key=lambda t: -t[1])) or "-"
    if beyond:
        summary = "; ".join(f"{b['choice']} beats {b['patched']} by {b['gain_over_patch']:+.3f} at {b['context']}"
                            for b in beyond) + "; " + summary
    elif judged and not all(judged):
        summary = f"ok in {sum(judged)}/{len(judged)}: " + summary
    row = {
        "env": base["env"], "patched": base["patched"], "learned": learned_map,
        "match": bool(judged) and all(judged),
        "return_learned": learned["return_mean"], "return_patched": ev["patched"]["return_mean"],
        "return_oracle": ev["oracle"]["return_mean"], "steps": learned["steps"],
        "wall_s": learned["train_wall_s"] + learned["eval_wall_s"],
        # extras
        "seed": learned["seed"], "algo": learned["algo"], "return_learned_ci95": learned["return_ci95"],
        "learned_where_it_matters": summary, "contexts": contexts,
        "contexts_matter": len(judged), "contexts_matched": sum(judged),
        # the three-valued verdict (patched / beyond / missed; None: nothing matters) and
        # success: every context that matters is patched or beyond
        "verdict": verdict, "success": verdict in ("patched", "beyond"), "beyond": beyond,
    }
    if not judged:
        row["note"] = "the choice matters in no context: nothing to rediscover"
    return row


# ------------------------------------------------------------------------ main
def rediscover(envs: Sequence[str] | None = None, seeds: int = 1, out: str = DEFAULT_OUT,
               config: str = DEFAULT_CONFIG, algo: str | None = None, workers: int | None = None,
               plots: bool = True, n_timesteps: int | None = None,
               log: Callable[[str], None] | None = None, ray: str | None = None,
               progress: str | None = None) -> RediscoverResult:
    """Train, evaluate and judge every (env, seed); see the module docstring."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    env_ids = list(envs) if envs else registered_env_ids()
    env_ids = [check_env_id(e, "--envs") for e in env_ids]   # (an old id: the id that replaces it)
    env_ids = list(dict.fromkeys(env_ids))   # (an id given twice is one env: two workers trained one run dir)
    check_int(seeds, "--seeds", 1, MAX_SEEDS)
    check_int(n_timesteps, "--n-timesteps", 1, MAX_TIMESTEPS, optional=True)
    cfgs = {e: load_train_config(config, e, algo) for e in env_ids}  # every config error up front
    note = overshoot_note(cfgs, n_timesteps)
    if note:
        log(note)
    algo_name = next(iter(cfgs.values())).algo
    seed_list = list(range(seeds))
    workers = check_workers(workers)
    check_ray(ray)
    make_out_dir(out, "--out")
    with DirLock(out, "--out"):  # one rediscover per --out at a time
        announce("kenv rediscover", len(seed_list) * sum(train_s(e, n_timesteps or c.n_timesteps)
                                                          for e, c in cfgs.items()), log)
        return _rediscover_locked(env_ids, cfgs, algo_name, seed_list, out, config, algo, workers, plots,
                                  n_timesteps, log, t0, ray, progress)


def _rediscover_locked(env_ids, cfgs, algo_name, seed_list, out, config, algo, workers, plots, n_timesteps, log,
                       t0, ray=None, progress=None) -> RediscoverResult:
    remove_stale_tmp(out)  # left by an interrupted run
    check_seed_runs(env_ids, seed_list, config, algo, out, n_timesteps)

    results: dict[tuple, dict] = {}
    tables: dict[str, dict] = {}
    jobs: list[Job] = []
    for e in env_ids:
        cached = cached_baselines(e, config, algo, out)
        if cached is not None:
            results[("baseline_job", e)] = cached
            continue
        env = make_env(cfgs[e])
        n_ctx = len(env.unwrapped.mix.contexts())
        env.close()
        tables[e] = {"rows": [None] * n_ctx, "left": n_ctx, "wall_s": 0.0}
        jobs += [Job(("table_job", e, i), table_job, (e, config, algo, i)) for i in range(n_ctx)]
    seed_jobs = []
    for s in seed_list:
        for e in env_ids:
            cached = cached_learned(e, s, config, algo, out, n_timesteps)
            if cached is not None:
                results[("seed_job", e, s)] = cached
            else:
                run_dir = os.path.dirname(_learned_path(out, e, s))
                where = (run_dir, None) if ray is None else (None, read_tree(run_dir))   # (job_dir)
                seed_jobs.append(Job(("seed_job", e, s), seed_job, (e, s, config, algo, n_timesteps, *where)))
    jobs = seed_jobs + jobs
    n_done = 0

    def on_done(job: Job, res: dict) -> list[Job]:
        nonlocal n_done
        n_done += 1
        key = job.key
        if key[0] == "table_job":
            t = tables[key[1]]
            t["rows"][res["index"]] = res["row"]
            t["left"] -= 1
            t["wall_s"] += res["wall_s"]
            if t["left"] == 0:
                return [Job(("baseline_job", key[1]), baseline_job,
                            (key[1], config, algo, t["rows"], t["wall_s"]))]
            return []
        if key[0] == "seed_job":   # the run's files, then learned.json (the mark of a finished seed)
            path = _learned_path(out, key[1], key[2])
            if res["files"] is not None:
                write_tree(os.path.dirname(path), res["files"])
            write_cached_doc(path, res["doc"])
            res = res["doc"]
        else:
            write_cached_doc(_baselines_path(out, key[1]), res)
        results[key] = res
        if key[0] == "baseline_job":
            log(f"[{n_done}] {key[1]}: static-action table, oracle and baselines ({res['wall_s']:.1f}s of CPU)")
        else:
            log(f"[{n_done}] {key[1]} seed {key[2]}: {res['steps']} steps, train {res['train_wall_s']:.1f}s, "
                f"evaluation {res['eval_wall_s']:.1f}s")
        return []

    run_jobs(jobs, on_done, workers=workers, ray=ray, progress=progress)

    rows, env_docs = [], {}
    for e in env_ids:
        base = results[("baseline_job", e)]
        env_rows = [build_row(base, results[("seed_job", e, s)]) for s in seed_list]
        rows += env_rows
        ed = {"patched": base["patched"], "profile": base["profile"], "contexts": base["contexts"],
              "baselines": {p["name"]: {"return_mean": p["return_mean"], "return_ci95": p["return_ci95"]}
                            for p in base["evaluation"]["policies"]},
              "skipped": base["evaluation"].get("skipped", {}), "baseline_wall_s": base["wall_s"],
              "matched_seeds": sum(1 for r in env_rows if r["match"]),
              "succeeded_seeds": sum(1 for r in env_rows if r["success"]), "seeds": len(env_rows)}
        if plots:
            ed.update(write_plots(out, e, base, [results[("seed_job", e, s)] for s in seed_list]))
        env_docs[e] = ed
    res = RediscoverResult(cfgs[env_ids[0]].source, algo_name, seed_list, out, rows, env_docs,
                           time.perf_counter() - t0)
    atomic_write_json(os.path.join(out, "rediscover.json"), res.to_dict())
    atomic_write_text(os.path.join(out, "rediscover.txt"), res.format_text() + "\n")
    return res


def write_plots(out: str, env_id: str, base: dict, learned: list[dict]) -> dict:
    from . import plots

    slug = env_slug(env_id)
    curves = {f"PPO seed {d['seed']}" if d["algo"] == "ppo" else f"{d['algo'].upper()} seed {d['seed']}":
              read_evaluations(os.path.join(out, slug, f"seed_{d['seed']}")) for d in learned}
    ev = {p["name"]: p for p in base["evaluation"]["policies"]}
    # the curves evaluate the first CURVE_EPISODES of the evaluation episodes: so do the lines
    lines = {n: float(np.mean(ev[n]["returns"][:CURVE_EPISODES]))
             for n in ("patched", "oracle", "pre_patch", "original", "random") if n in ev}
    lc = os.path.join(out, f"{slug}_learning_curve.png")
    plots.learning_curves(lc, f"{env_id} (patched: {base['patched']})", curves, lines)
    w = base["signed_weights"]
    contrib = {}
    if learned:
        contrib["learned"] = {c: w[c] * float(np.mean([d["components"].get(c, 0.0) for d in learned]))
                              for c in COMPONENTS}
    for n in ("patched", "oracle", "pre_patch", "original", "random"):
        if n in ev:
            contrib[n] = {c: w[c] * ev[n]["components"].get(c, 0.0) for c in COMPONENTS}
    rc = os.path.join(out, f"{slug}_reward_components.png")
    plots.reward_components(rc, f"{env_id}: return by reward component (profile {base['profile']}; "
                                f"learned: mean of {len(learned)} seed(s))", contrib)
    return {"learning_curve": lc, "reward_components": rc}


# ------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    p.add_argument("--envs", nargs="+", default=None, metavar="ID",
                   help="env ids (default: every registered kenv/* id)")
    p.add_argument("--seeds", type=cli_integer, default=1, help="train seeds 0..N-1 per env (default 1)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT}); "
                   "a rerun skips what is finished and resumes a partial run")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="training config (default: the shipped ppo)")
    p.add_argument("--algo", default=None, help="ppo, a2c or dqn (default: the config file's name)")
    p.add_argument("--workers", type=cli_integer, default=None,
                   help="processes (default min(2, CPUs)); results do not depend on it")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="run the jobs as Ray tasks on a cluster (auto: the one this machine belongs to; "
                        "needs kenv-gym[ray]; see docs/scaling.md); --workers is then unused")
    p.add_argument("--no-plots", action="store_true", help="do not write the PNG figures")
    p.add_argument("--n-timesteps", type=cli_integer, default=None,
                   help="override the config's n_timesteps (quick checks; the claim is for the shipped budget)")


def run_from_args(args) -> RediscoverResult:
    try:
        return rediscover(args.envs, args.seeds, args.out, args.config, args.algo, args.workers,
                          plots=not args.no_plots, n_timesteps=args.n_timesteps, ray=args.ray,
                          progress="rediscover")
    except KeyboardInterrupt:
        print(f"kenv rediscover: interrupted; the same command resumes it (--out {args.out})", file=sys.stderr)
        raise SystemExit(130) from None
