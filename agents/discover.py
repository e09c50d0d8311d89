"""``kenv discover``: beyond the patches -- is there a better kernel policy, and what is it?

    kenv discover --env ID [--profile P|all] [--actions extended] [--steps N] [--seeds N]
                  [--train-seed S] [--out DIR] [--json]

For one env and each reward profile (default: every packaged one) this compares three
policies over the *extended* action set (the env's ``actions=`` with every choice the
kernel offers; :func:`action_set`) on held-out episodes:

``patched``
    the upstream patch as a constant policy (``timer``, ``hwrng_yield``,
    ``migrate_disable``);
``best_static``
    the oracle over constant policies: every static action (every combination, for
    kenv/Kernel-v3) is played on ``--seeds`` *selection* episodes; the one with the best
    mean return there is chosen, then reported on the held-out episodes.  The patched
    action is one of the candidates, so on the selection episodes ``best_static >=
    patched`` holds by construction;
``learned``
    PPO trained with the shipped config (``configs/train/ppo.yaml``, the env's block) on
    the extended set under the profile (``--steps`` overrides its budget, rounded up to
    whole rollouts: :func:`whole_rollouts`), then its
    deterministic policy.

and three more rows: ``best_accepted`` (the best static action on the selection
episodes among those with nothing a kernel developer refuses, :func:`refusals`),
``context_oracle`` (the best static action *per scenario context*, chosen on the
selection episodes of that context: a static policy that knows the whole scenario,
including fields the observation does not show) and ``rule`` (the distilled decision
tree, below, run as a policy).  Only the static actions some profile chose are played on
the held-out episodes (the others are never reported).

Episodes and seeds (all disjoint, and disjoint from training, whose environments are
seeded ``train_seed + rank`` and whose learning-curve evaluations use seeds 1,000,000+):
selection ``SELECT_SEED + i``, held-out ``HELDOUT_SEED + i`` (i < ``--seeds``; each
reset draws its scenario from the env's mix, so these are held-out scenario draws too),
distillation states ``DISTILL_SEED + i``.
Every policy plays the same held-out episodes; ``beats_*`` compare two policies on them
pairwise: the mean of the per-episode differences minus its 95% interval (Student t,
:func:`kenv.agents.evaluate.ci95`) must be above 0.  ``beats_patch``: learned beats patched;
``beats_best_static``: learned beats best_static (the state-dependent policy beats the
best constant one); ``best_static_beats_patch``: the constant oracle beats the patch.

Distillation (scikit-learn, the optional extra ``discover``): one shallow
``DecisionTreeClassifier`` (``max_depth`` ``RULE_DEPTH``) per action dimension, fitted to
(observation -> the network's deterministic action) on the states the learned policy
visits in ``--seeds`` distillation episodes; ``rule_agreement`` is the share of the
held-out episodes' states (visited by the learned policy) where the rule's action equals
the network's (every dimension).  The rule is printed with the env's observation entry
names (``env.unwrapped.obs_rows``) and thresholds turned back into kernel units where the
env's observation table gives the scaling (:data:`UNITS`).

Kernel counters per policy (from ``info``, means per episode): BUG reports (and on which
preemption model), RCU stall reports, CPU burned spinning in ``cpu_relax()`` (share of
the simulated time), and the env's own (hwrng bytes/s, tcp_lat, worst cyclictest wakeup,
raid6 throughput lost).  A policy that beats the patch while it hits a BUG, an RCU stall,
or spins more than ``SPIN_REFUSED`` of a CPU gets a finding that says a kernel developer
would refuse it; so does one that uses a choice the upstream review refused for a reason
outside the reward (:data:`REVIEW_OBJECTIONS`).

Output (``--out``, default ``runs/discover/<env>``), every file written atomically:
``discover.json`` (also printed with ``--json``), ``discover.md`` (a short report),
``discover.png`` (per profile: throughput against latency, and against CPU burned, one
point per policy, the patch marked), ``static.json`` (every static action's selection
episodes: profile-independent, see :func:`static_job`), ``static_heldout.json`` (the
chosen ones' held-out episodes) and per profile ``<profile>/train/`` (the
training run, :mod:`kenv.agents.train`) and ``<profile>/learned.json``.

Resuming: as ``kenv rediscover``, a rerun with the same ``--out`` skips what is finished
(``static.json``, ``static_heldout.json``, ``learned.json`` with the same fingerprint; anything else is
recomputed) and resumes a training run from its newest checkpoint, exactly (see
agents/train.py), so a killed run, rerun, gives the same ``discover.json`` as an
uninterrupted one (``wall_s`` aside).  ``<out>/.lock`` refuses a second run on the same
directory.  A rerun with another ``--profile`` or ``--seeds`` is refused before any work
(:func:`check_same_run`): ``discover.json`` is the summary of one run.

Work: the static table (then the chosen actions' held-out episodes) and each profile's
training run are independent jobs, run side by side in ``--workers`` processes (default
``min(2, CPUs)``, one torch thread each) or as Ray tasks (``--ray``,
:mod:`kenv.agents.jobs`); the results do not depend on where they ran.

``--json`` keys (stable): ``{"env", "actions", "seeds", "profiles": [{"profile", "patched",
"best_static", "learned", "rule", "rule_agreement", "rule_agreement_low", "beats_patch", "beats_best_static",
"steps_trained", "steps_asked", "rollout_steps", ...}], ...}``; each policy: ``{"policy", "return_mean", "return_ci95", "components",
"counters", ...}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
import numpy as np

import kenv
from kenv.envs.registration import canonical_id, check_env_id
from kenv.envs.reward import COMPONENTS, SIGN, available_profiles, load_profile
from kenv.errors import ConfigError
from kenv.schema import check_choice, check_int, cli_int

from .baselines import Policy, StaticPolicy, make_policy, run_episode, static_actions
from .estimate import announce, train_s
from .evaluate import ci95
from .jobs import Job, cached_doc, check_ray, check_workers, job_dir, read_tree, run_jobs, \
    write_cached_doc, write_tree
from .plots import save_png
from .train import (
    MAX_TIMESTEPS, DirLock, ModelPolicy, TrainArgs, TrainConfig, action_key, atomic_write_json, atomic_write_text,
    check_resumable, context_label, env_slug, fingerprint, load_model, load_train_config, make_env, make_out_dir,
    read_json, remove_stale_tmp, rollout_steps, steps_to_train, train, varying_fields, SB3_N_STEPS,
)

DEFAULT_CONFIG = "ppo"
#: --actions: the action sets searched
ACTION_SETS = ("extended", "default")
#: held-out (and selection, and distillation) episodes per profile
DEFAULT_SEEDS = 50
#: a 95% interval needs 2 episodes
MIN_SEEDS, MAX_SEEDS = 2, 10_000
#: what --seeds allows, the one statement of it (check_seeds, seeds_arg, --help)
SEEDS_ALLOWED = f"an integer in {MIN_SEEDS}..{MAX_SEEDS} (a 95% interval needs at least {MIN_SEEDS} episodes)"
#: what --steps allows (check_steps; it is rounded up to whole rollouts, :func:`whole_rollouts`)
STEPS_ALLOWED = f"an integer in 1..{MAX_TIMESTEPS}"
SELECT_SEED = 3_000_000
HELDOUT_SEED = 4_000_000
DISTILL_SEED = 5_000_000
#: the rule's decision trees
RULE_DEPTH = 3
#: below this ``rule_agreement`` the report warns that the rule does not describe the
#: network (``rule_agreement_low`` in --json): a rule that disagrees with it on more than
#: one held-out state in five is another policy, not its summary.  A choice, not a
#: measurement; tiny --seeds give the trees few states to fit (1.3% on KernelPhased-v0 with
#: --steps 256 --seeds 2)
RULE_AGREEMENT_MIN = 0.8
#: a policy spinning more than this share of a CPU in cpu_relax() is one a kernel developer refuses
SPIN_REFUSED = 0.01
#: bump when the content of static.json / learned.json changes
FORMAT = 3

#: waits the upstream review of the bcm2835 fix tried besides the three in the env's
#: default set (kernel-notes.md section 3, "Also tried in the review thread")
HWRNG_REVIEW_WAITS = ("usleep_range(100,200)", "usleep_range(200,400)", "hwrng_msleep(20)")
#: the action dimensions of kenv/Kernel-v3 and the single env whose choices each takes
KERNEL_DIMENSIONS = (("deferral", "kenv/RandomMix-v2"), ("wait", "kenv/HwrngWait-v2"),
                     ("raid6", "kenv/Raid6Bench-v3"))
#: where each decision sits in the kernel, per action dimension (for the rule's text)
SITES = {"kenv/RandomMix-v2": ("add_interrupt_randomness()",),
         "kenv/HwrngWait-v2": ("bcm2835_rng_read()",),
         "kenv/Raid6Bench-v3": ("raid6_choose_gen()",),
         "kenv/Kernel-v3": ("add_interrupt_randomness()", "bcm2835_rng_read()", "raid6_choose_gen()")}
#: choices the upstream review refused for a reason the reward does not see (source named)
REVIEW_OBJECTIONS = {
    "usleep_range": "upstream requires sleeps in hwrng drivers to be cancellable through rng->dying "
                    "(device removal, suspend), which usleep_range() is not (kernel-notes.md section 3)",
}


# --------------------------------------------------------------------------- actions
def family(env_id: str) -> str:
    """The base task's id of ``env_id``'s env class (its ENV_ID): every version and variant of an env (HwrngWaitPhased-v0,
    the HwrngWait controls) shares its class, its decision sites and its action choices.  An old id
    (kenv.envs.registration.RENAMED) is its new one's: an old variant's entry point is a function."""
    return load_env_creator(gym.spec(canonical_id(env_id)).entry_point).VERSIONS[0].id


def action_set(env_id: str, which: str = "extended") -> Any:
    """The ``actions=`` argument of the env for ``which`` (``default``: None; ``extended``:
    the default choices, then every extended one the env accepts)."""
    if check_choice(which, "--actions", ACTION_SETS) == "default":
        return None
    if family(env_id) == "kenv/Kernel-v3":
        return {dim: list(action_set(single)) for dim, single in KERNEL_DIMENSIONS}
    cls = type(gym.make(env_id).unwrapped)
    extra = HWRNG_REVIEW_WAITS if family(env_id) == "kenv/HwrngWait-v2" else tuple(cls.EXTENDED_ACTIONS)
    return list(cls.DEFAULT_ACTIONS) + list(extra)


def _make(env_id: str, actions: Any, profile: str = "balanced") -> gym.Env:
    return gym.make(env_id, actions=actions, profile=profile)


# -------------------------------------------------------------------------- episodes
def _counters(infos: list[dict]) -> dict:
    """An episode's kernel counters from its step infos (the keys the env has)."""
    last = infos[-1]
    sim_s = float(sum(i["step_sim_s"] for i in infos))
    spin = float(sum(i.get("spin_cpu_s", 0.0) for i in infos))
    c = {"steps": len(infos), "sim_s": sim_s, "bugs": int(last["bugs"]), "rcu_stalls": int(last["rcu_stalls"]),
         "spin_cpu_s": spin, "cpu_burned": spin / sim_s if sim_s > 0 else 0.0, "preempt": str(last["preempt"])}
    if "hwrng_bytes" in last:
        c["hwrng_bytes_per_s"] = float(sum(i["hwrng_bytes"] for i in infos)) / sim_s if sim_s > 0 else 0.0
    lat = [float(i["latency_us"]) for i in infos if "latency_us" in i and float(i["latency_us"]) >= 0]
    if "latency_us" in last:
        c["tcp_lat_us"] = float(np.mean(lat)) if lat else None
    wk = [float(i["worst_wakeup_us"]) for i in infos if "worst_wakeup_us" in i]
    if "worst_wakeup_us" in last:
        c["worst_wakeup_us"] = max(wk) if wk else None
    if "throughput_lost" in last:
        c["raid6_throughput_lost"] = float(last["throughput_lost"]) if float(last["throughput_lost"]) >= 0 else None
    return c


def play(env: gym.Env, policy: Policy, seed: int, options: dict | None = None,
         states: list | None = None) -> dict:
    """One episode (:func:`run_episode`): its component sums (COMPONENTS order), its
    counters, its context label and return; with ``states``, each step's
    (observation, action key) appended to it."""
    steps: list | None = [] if states is not None else None
    infos: list = []
    total, comps, _ = run_episode(env, policy, seed, options, states=steps, infos=infos)
    if states is not None:
        states.extend((obs, action_key(a)) for obs, a in steps)
    return {"components": [comps.get(c, 0.0) for c in COMPONENTS], "counters": _counters(infos),
            "context": context_label(env.unwrapped.scenario, varying_fields(env)), "return": float(total)}


def signed_weights(profile: str) -> np.ndarray:
    p = load_profile(profile)
    return np.array([SIGN[c] * p.weights[c] for c in COMPONENTS])


def returns_of(components: list[list[float]], weights: np.ndarray) -> list[float]:
    """Episode returns under a profile from the episodes' component sums (a step's reward
    is the weighted sum of its components; the trajectory does not depend on the weights)."""
    return [float(np.dot(weights, c)) for c in components]


# ----------------------------------------------------------------------- static job
def _fp(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def static_fingerprint(env_id: str, actions: Any, seeds: int) -> str:
    return _fp({"env": env_id, "actions": actions, "seeds": seeds, "seeds_at": [SELECT_SEED, HELDOUT_SEED],
                "kenv": kenv.__version__, "format": FORMAT})


def cached_static(env_id: str, actions: Any, seeds: int, path: str) -> dict | None:
    """static.json in ``path`` if it is :func:`static_job`'s for these arguments (the driver's check)."""
    doc = cached_doc(path, (), static_fingerprint(env_id, actions, seeds))
    return doc if doc is not None and "actions" in doc else None


def static_job(env_id: str, actions: Any, seeds: int) -> dict:
    """Every static action on the selection episodes (the driver caches it in static.json).
    Kept as component sums: a static policy's trajectory does not depend on the reward
    profile, so one run serves every profile."""
    fp = static_fingerprint(env_id, actions, seeds)
    t0 = time.perf_counter()
    env = _make(env_id, actions)
    base = env.unwrapped
    rows, contexts = {}, []
    for a in static_actions(env):
        pol = StaticPolicy("static", a)
        select = [play(env, pol, SELECT_SEED + i) for i in range(seeds)]
        rows[base.action_label(a)] = {"action": list(action_key(a)), "select": [e["components"] for e in select],
                                      "select_counters": [e["counters"] for e in select]}
        contexts = [e["context"] for e in select]   # (a function of the seed alone)
    env.close()
    doc = {"env": env_id, "fingerprint": fp, "actions": rows, "select_contexts": contexts,
           "wall_s": time.perf_counter() - t0}
    return doc


def heldout_job(env_id: str, actions: Any, seeds: int, labels: Sequence[str], doc: Any) -> dict:
    """The held-out episodes of the static actions ``labels`` (the ones some profile
    chose), added to those already in ``doc`` (static_heldout.json as the driver read it;
    it writes the result)."""
    fp = static_fingerprint(env_id, actions, seeds)
    if not (isinstance(doc, dict) and doc.get("fingerprint") == fp and isinstance(doc.get("actions"), dict)):
        doc = {"env": env_id, "fingerprint": fp, "actions": {}, "contexts": None, "wall_s": 0.0}
    todo = [lab for lab in labels if lab not in doc["actions"]]
    if not todo:
        return doc
    t0 = time.perf_counter()
    env = _make(env_id, actions)
    base = env.unwrapped
    for a in static_actions(env):
        lab = base.action_label(a)
        if lab in todo:
            held = [play(env, StaticPolicy("static", a), HELDOUT_SEED + i) for i in range(seeds)]
            doc["actions"][lab] = {"heldout": [e["components"] for e in held],
                                   "counters": [e["counters"] for e in held]}
            doc["contexts"] = [e["context"] for e in held]
    env.close()
    doc["wall_s"] += time.perf_counter() - t0
    return doc


def choose_static(static: dict, profile: str, patched_label: str) -> dict:
    """A profile's choices among the static actions, on the selection episodes alone:
    ``best`` (a tie keeps the patch), ``accepted`` (the best with nothing a kernel
    developer refuses, :func:`refusals`; None if none) and ``per_context`` (the best on
    the selection episodes of each scenario context; ``best`` where a context has none)."""
    w = signed_weights(profile)
    rows = static["actions"]
    sel = {lab: float(np.mean(returns_of(r["select"], w))) for lab, r in rows.items()}
    best = max(sel, key=lambda lab: (sel[lab], lab == patched_label))
    ok = [lab for lab in rows if not refusals(summarise("", lab, rows[lab]["select"], rows[lab]["select_counters"], w),
                                              [lab])]
    acc = max(ok, key=lambda lab: (sel[lab], lab == patched_label)) if ok else None
    per_ctx = {}
    for ctx in sorted(set(static["select_contexts"])):
        idx = [i for i, c in enumerate(static["select_contexts"]) if c == ctx]
        per_ctx[ctx] = max(rows, key=lambda lab: (float(np.mean([returns_of([rows[lab]["select"][i]], w)[0]
                                                                  for i in idx])), lab == patched_label))
    selection = {lab: {"mean": m, "ci95": ci95(returns_of(rows[lab]["select"], w))}
                 for lab, m in sorted(sel.items(), key=lambda t: -t[1])}
    return {"best": best, "accepted": acc, "per_context": per_ctx, "selection": selection}


def chosen_labels(choice: dict, patched_label: str) -> list[str]:
    labs = [patched_label, choice["best"]] + ([choice["accepted"]] if choice["accepted"] else [])
    return list(dict.fromkeys(labs + sorted(set(choice["per_context"].values()))))


# ------------------------------------------------------------------- distillation
def require_sklearn() -> None:
    if importlib.util.find_spec("sklearn") is None:
        raise ConfigError("scikit-learn", "not installed", "pip install 'kenv-gym[discover]' (the optional "
                          "extra `discover`: kenv discover distils the learned policy into a decision tree "
                          "with scikit-learn)")


def fit_tree(X: np.ndarray, y: np.ndarray, depth: int = RULE_DEPTH) -> dict:
    """A DecisionTreeClassifier on (X, y) as plain data: per node ``feature`` (-1 at a
    leaf), ``threshold``, ``left``/``right`` (x <= threshold goes left), ``value`` (the
    class at a leaf) and ``n`` (training samples), with splits whose two sides give the
    same class merged away."""
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X, y)
    t = clf.tree_

    def node(i: int) -> dict:
        n = int(t.n_node_samples[i])
        if t.children_left[i] == -1:
            return {"feature": -1, "value": int(clf.classes_[int(np.argmax(t.value[i][0]))]), "n": n}
        left, right = node(int(t.children_left[i])), node(int(t.children_right[i]))
        if left["feature"] == right["feature"] == -1 and left["value"] == right["value"]:
            return {"feature": -1, "value": left["value"], "n": n}
        return {"feature": int(t.feature[i]), "threshold": float(t.threshold[i]), "left": left, "right": right,
                "n": n}

    return node(0)


def tree_predict(tree: dict, x: Sequence[float]) -> int:
    while tree["feature"] >= 0:
        tree = tree["left"] if x[tree["feature"]] <= tree["threshold"] else tree["right"]
    return tree["value"]


class RulePolicy(Policy):
    """The distilled rule as a policy: one tree per action dimension."""

    def __init__(self, trees: list[dict], discrete: bool, name: str = "rule"):
        self.trees, self.discrete, self.name = trees, discrete, name

    def act(self, obs, info):
        a = [tree_predict(t, obs) for t in self.trees]
        return a[0] if self.discrete else np.array(a, dtype=np.int64)


#: observation entries whose threshold turns back into kernel units: name ->
#: (unit text, function of the normalised value); the scalings are those of the
#: envs' observation tables
UNITS: dict[str, tuple[str, Callable[[float], float]]] = {
    "HZ / 1000": ("HZ", lambda t: 1000 * t),
    "time since boot / 60 s": ("seconds since boot", lambda t: 60 * t),
    "crng progress": ("bits credited to the input pool", lambda t: 256 * t),
    "log2(msg_size / 4K) / 8": ("qperf msg_size (KiB)", lambda t: 4 * 2 ** (8 * t)),
    "previous tcp_lat regression x 5": ("previous step's tcp_lat regression (%)", lambda t: 100 * t / 5),
    "previous worst wakeup (log scale)": ("previous step's worst cyclictest wakeup (us)", lambda t: 10 ** (6 * t) - 1),
    "benchmark progress": ("raid6 benchmark windows done", lambda t: 18 * t),
    "raid6 benchmark progress": ("raid6 benchmark windows done", lambda t: 18 * t),
    "previous throughput": ("previous step's throughput component (log-scaled bytes/s)", lambda t: t),
    "previous hwrng throughput": ("previous step's hwrng throughput component (log-scaled bytes/s)", lambda t: t),
    "previous spin": ("previous step's CPU share spun in cpu_relax() (%)", lambda t: 100 * t),
    "previous hwrng spin": ("previous step's CPU share spun in cpu_relax() (%)", lambda t: 100 * t),
    "previous window's lost calls": ("previous window's calls lost to preemption (%)", lambda t: 100 * t),
    "previous raid6 window's lost calls": ("previous window's calls lost to preemption (%)", lambda t: 100 * t),
}


def condition(name: str, threshold: float, left: bool, binary: bool) -> str:
    """The condition of one side of a split (left: value <= threshold) in kernel terms."""
    if binary:
        if "==" in name:
            return name.replace("==", "!=" if left else "==")
        return f"not ({name})" if left else name
    if name == "1 / nr_cpus":   # decreasing in the kernel unit: the comparison turns round
        return f"nr_cpus {'>=' if left else '<'} {1 / threshold:.3g}" if threshold > 0 else "nr_cpus >= 1"
    unit, f = UNITS.get(name, (name, lambda t: t))
    v = f(threshold)
    return f"{unit} {'<=' if left else '>'} {v:.3g}"


def _code(label: str) -> str:
    return f"`{label}()`" if "(" not in label and label in ("cpu_relax", "hwrng_yield", "cond_resched") \
        else f"`{label}`"


def rule_text(tree: dict, names: Sequence[str], binary: Sequence[bool], labels: Sequence[str], site: str) -> str:
    """``in `site`: `A` while C1 and C2; `B` otherwise`` from a tree (the class with the
    most training samples is the ``otherwise``)."""
    leaves: list[tuple[list[str], int, int]] = []

    def walk(t: dict, conds: list[tuple[int, bool, float]]):
        if t["feature"] < 0:
            leaves.append((_merge(conds, names, binary), t["value"], t["n"]))
            return
        walk(t["left"], conds + [(t["feature"], True, t["threshold"])])
        walk(t["right"], conds + [(t["feature"], False, t["threshold"])])

    walk(tree, [])
    by_class: Counter = Counter()
    for _, v, n in leaves:
        by_class[v] += n
    default = by_class.most_common(1)[0][0]
    parts = []
    for v in [v for v, _ in by_class.most_common() if v != default]:
        whens = [" and ".join(c) for c, lv, _ in leaves if lv == v]
        if len(whens) > 1:
            whens = [f"({w})" if " and " in w else w for w in whens]
        parts.append(f"{_code(labels[v])} while {' or '.join(whens)}")
    parts.append(f"{_code(labels[default])} {'otherwise' if parts else 'always'}")
    return f"in `{site}`: " + "; ".join(parts)


def _merge(conds: list[tuple[int, bool, float]], names: Sequence[str], binary: Sequence[bool]) -> list[str]:
    """The conditions of a path, the tightest bound per feature and side."""
    best: dict[tuple[int, bool], float] = {}
    for f, left, thr in conds:
        k = (f, left)
        best[k] = min(best.get(k, thr), thr) if left else max(best.get(k, thr), thr)
    out = [condition(names[f], thr, left, binary[f]) for (f, left), thr in best.items()]
    # one-hot entries: "X == a" says all that "X != b" says
    known = {c.split(" == ")[0] for c in out if " == " in c}
    return [c for c in out if " != " not in c or c.split(" != ")[0] not in known]


# ---------------------------------------------------------------------- learned job
LEARNED_KEYS = ("fingerprint", "profile", "train", "heldout", "counters", "actions_taken", "trees", "rule",
                "rule_agreement", "rule_heldout", "rule_counters")


#: PPO's n_steps when a config block does not set it (stable-baselines3's default)
PPO_N_STEPS = SB3_N_STEPS["ppo"]


def whole_rollouts(cfg: TrainConfig, steps: int) -> int:
    """``steps`` rounded up to whole rollouts: what PPO trains for ``--steps``.  The budget
    is set to it, not left for PPO to overshoot: a ``lin_`` learning-rate schedule counts
    down to 0 at the budget, and past it the rate turns negative (``--steps 64`` on
    HwrngWait-v2 trained one 512-step rollout at -7 x 3e-3, ascending the loss)."""
    return steps_to_train(replace(cfg, n_timesteps=steps))


def train_setup(env_id: str, profile: str, actions: Any, train_seed: int, steps: int | None,
                out: str) -> tuple[TrainConfig, TrainArgs]:
    """The training run of one profile: its config and its arguments (``<out>/<profile>/train``)."""
    cfg = load_train_config(DEFAULT_CONFIG, env_id)
    cfg.env_kwargs = {"actions": actions, "profile": profile_file(profile)}   # (one run for ./x.yaml and x.yaml)
    if steps is not None:
        cfg.n_timesteps = whole_rollouts(cfg, int(steps))
    run_dir = os.path.join(out, _profile_slug(profile), "train")
    return cfg, TrainArgs(config=DEFAULT_CONFIG, env=env_id, algo=cfg.algo, seed=train_seed, out=run_dir,
                          resume=True)


@contextlib.contextmanager
def refusing_other_training(out: str):
    """A training run in ``out`` made with other flags: the error names --out."""
    try:
        yield
    except ConfigError as e:
        if e.field != "--resume":
            raise
        raise ConfigError("--out", out, "a new directory, or the --env, --steps, --actions, --train-seed and --profile "
                          "(a YAML file's content included) of the run already there (its training was made "
                          "with others)") from None


def training_budget(env_id: str, steps: int | None) -> dict:
    """What --steps asked (None: the config's budget) and the rollout it is rounded up to."""
    cfg = load_train_config(DEFAULT_CONFIG, env_id)
    return {"steps_asked": steps, "rollout_steps": rollout_steps(cfg),
            "rollout": f"n_envs x n_steps = {cfg.n_envs} x {cfg.hyperparams.get('n_steps', PPO_N_STEPS)}"}


def training_text(e: dict) -> str:
    """One line on the training budget of a profile entry."""
    n = e["steps_trained"] // e["rollout_steps"]
    line = (f"PPO trained {e['steps_trained']:,} steps: {n} whole rollout{'s' if n != 1 else ''} of "
            f"{e['rollout']} = {e['rollout_steps']:,}")
    if e["steps_asked"] is not None and e["steps_asked"] != e["steps_trained"]:
        line += f" (--steps {e['steps_asked']:,} rounded up to whole rollouts)"
    return line


def check_trainings(env_id: str, profiles: Sequence[str], actions: Any, train_seed: int, steps: int | None,
                    out: str) -> None:
    """Refuse, before any work, a rerun whose training runs in ``out`` were made with other flags."""
    for p in profiles:
        cfg, targs = train_setup(env_id, p, actions, train_seed, steps, out)
        with refusing_other_training(out):
            check_resumable(targs.out, fingerprint(cfg, train_seed, targs))


#: what a run in --out was asked for (its --profile and --seeds): ``<out>/discover_args.json``
ARGS_FILE = "discover_args.json"


def profile_file(profile: str) -> str:
    """What ``--profile`` resolves to: a YAML file's real path (``configs/x.yaml``,
    ``./configs/x.yaml`` and its absolute path are one profile; a file before a name,
    as :func:`kenv.envs.config.load_yaml`), else the name (``all``, ``balanced``)."""
    return os.path.realpath(profile) if os.path.isfile(profile) else profile


def run_args(profile: str, seeds: int) -> dict:
    """The content of ``ARGS_FILE``: --profile as typed and as resolved, --seeds."""
    return {"profile": profile, "seeds": seeds, "profile_file": profile_file(profile)}


def check_same_run(out: str, profile: str, profiles: Sequence[str], seeds: int) -> None:
    """Refuse, before any work, a rerun into ``out`` with another --profile or --seeds:
    discover.json holds one run's profiles on one set of episodes, so such a rerun would
    replace the summary of the run already there with its own (and --seeds would redo
    every episode).  The run's flags are ``ARGS_FILE``; a directory without it (made
    before it existed) is judged by its discover.json.  A profile counts by what it
    resolves to (:func:`profile_file`), not as typed; the message shows both as typed."""
    doc = read_json(os.path.join(out, ARGS_FILE))
    if isinstance(doc, dict) and "profile" in doc and "seeds" in doc:
        old = {"--profile": doc["profile"], "--seeds": doc["seeds"]}
        new = {"--profile": profile, "--seeds": seeds}
        # (a file written before "profile_file" existed: its --profile resolved here)
        same_profile = doc.get("profile_file", profile_file(str(doc["profile"]))) == profile_file(profile)
    else:
        doc = read_json(os.path.join(out, "discover.json"))
        if not (isinstance(doc, dict) and isinstance(doc.get("profiles"), list) and "seeds" in doc):
            return
        old_profiles = [str(e.get("profile")) for e in doc["profiles"] if isinstance(e, dict)]
        old = {"--profile": ", ".join(old_profiles), "--seeds": doc["seeds"]}
        new = {"--profile": ", ".join(profiles), "--seeds": seeds}
        same_profile = [profile_file(p) for p in old_profiles] == [profile_file(p) for p in profiles]
    for flag, same in (("--profile", same_profile), ("--seeds", old["--seeds"] == new["--seeds"])):
        if not same:
            raise ConfigError(flag, new[flag], f"{old[flag]!r}, the {flag} of the run already in --out {out} "
                              f"(its discover.json holds one run; use another --out for another {flag})")


def _learned_fp(cfg: TrainConfig, train_seed: int, targs: TrainArgs, seeds: int) -> str:
    return _fp({"train": fingerprint(cfg, train_seed, targs), "seeds": seeds, "depth": RULE_DEPTH,
                "seeds_at": [HELDOUT_SEED, DISTILL_SEED], "format": FORMAT})


def cached_learned(env_id: str, profile: str, actions: Any, seeds: int, train_seed: int, steps: int | None,
                   out: str) -> dict | None:
    """``<out>/<profile>/learned.json`` if it is :func:`learned_job`'s for these arguments."""
    cfg, targs = train_setup(env_id, profile, actions, train_seed, steps, out)
    return cached_doc(os.path.join(os.path.dirname(targs.out), "learned.json"), LEARNED_KEYS,
                      _learned_fp(cfg, train_seed, targs, seeds))


def learned_job(env_id: str, profile: str, actions: Any, seeds: int, train_seed: int, steps: int | None,
                out: str, run_dir: str | None = None, prior: dict[str, bytes] | None = None) -> dict:
    """Train (or resume) PPO under ``profile`` on the extended set, then play the saved
    model on the held-out episodes, distil it and play the rule.  The training run is in
    ``run_dir``, or with None in a temporary directory holding ``prior``
    (:func:`kenv.agents.jobs.job_dir`).  Returns ``{"doc": learned.json, "files": the
    run's files, or None when in run_dir}``; the driver writes them (``<out>/<profile>``)."""
    with job_dir(run_dir, prior) as d:
        return _learned_job(env_id, profile, actions, seeds, train_seed, steps, out, d, run_dir is None)


def _learned_job(env_id, profile, actions, seeds, train_seed, steps, out, run_dir, return_files) -> dict:
    cfg, targs = train_setup(env_id, profile, actions, train_seed, steps, out)
    targs = replace(targs, out=run_dir)
    fp = _learned_fp(cfg, train_seed, targs, seeds)
    with refusing_other_training(out):
        res = train(targs, cfg, log=lambda s: None)
    t0 = time.perf_counter()
    env = make_env(cfg)
    model = load_model(run_dir, cfg.algo, env=env)
    base = env.unwrapped
    learned = ModelPolicy(model)
    held_states: list = []
    held = [play(env, learned, HELDOUT_SEED + i, states=held_states) for i in range(seeds)]
    fit_states: list = []
    for i in range(seeds):
        play(env, learned, DISTILL_SEED + i, states=fit_states)
    X = np.array([s for s, _ in fit_states])
    Y = np.array([a for _, a in fit_states])
    trees = [fit_tree(X, Y[:, d]) for d in range(Y.shape[1])]
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    hx = np.array([s for s, _ in held_states])
    hy = np.array([a for _, a in held_states])
    pred = np.array([[tree_predict(t, x) for t in trees] for x in hx])
    agreement = float(np.mean(np.all(pred == hy, axis=1)))
    per_dim = [float(np.mean(pred[:, d] == hy[:, d])) for d in range(hy.shape[1])]
    rule = RulePolicy(trees, discrete)
    rule_held = [play(env, rule, HELDOUT_SEED + i) for i in range(seeds)]
    names = [r[0] for r in base.obs_rows]
    both = np.concatenate([X, hx])
    binary = [bool(np.all((both[:, j] == 0) | (both[:, j] == 1))) for j in range(both.shape[1])]
    labels = _dim_labels(base)
    sites = SITES.get(family(env_id), ("the kernel",) * len(trees))
    text = "\n".join(rule_text(t, names, binary, labels[d], sites[d]) for d, t in enumerate(trees))
    taken = Counter(base.action_label(np.array(a) if not discrete else a[0]) for _, a in held_states)
    env.close()
    doc = {"env": env_id, "profile": profile, "fingerprint": fp,
           "train": {"seed": train_seed, "steps": res.steps, "wall_s": res.wall_s, "algo": cfg.algo,
                     "config": cfg.source},
           "heldout": [e["components"] for e in held], "counters": [e["counters"] for e in held],
           "actions_taken": {k: v / len(held_states) for k, v in taken.most_common()},
           "trees": trees, "rule": text, "rule_agreement": agreement, "rule_agreement_per_dim": per_dim,
           "distill_states": len(fit_states), "heldout_states": len(held_states),
           "rule_heldout": [e["components"] for e in rule_held], "rule_counters": [e["counters"] for e in rule_held],
           "eval_wall_s": time.perf_counter() - t0}
    return {"doc": doc, "files": read_tree(run_dir) if return_files else None}


def _dim_labels(base) -> list[list[str]]:
    """Per action dimension, the label of each value."""
    if isinstance(base.action_space, gym.spaces.Discrete):
        return [list(base.actions)]
    return [list(names) for names in base.actions]


def _profile_slug(profile: str) -> str:
    return os.path.splitext(os.path.basename(profile))[0]


# ----------------------------------------------------------------------- the report
def summarise(name: str, label: str, components: list[list[float]], counters: list[dict],
              weights: np.ndarray) -> dict:
    """One policy's row: returns under the profile with their 95% interval, mean
    components, and the kernel counters (means per episode; BUGs by preemption model)."""
    rets = returns_of(components, weights)
    comps = np.mean(np.array(components), axis=0)
    keys = [k for k in counters[0] if k != "preempt"]
    cnt = {}
    for k in keys:
        vals = [c[k] for c in counters if c.get(k) is not None]
        cnt[k] = float(np.mean(vals)) if vals else None
    cnt["episodes_with_bug"] = sum(1 for c in counters if c["bugs"] > 0)
    cnt["episodes_with_rcu_stall"] = sum(1 for c in counters if c["rcu_stalls"] > 0)
    by: Counter = Counter()
    for c in counters:
        if c["bugs"]:
            by[c["preempt"]] += c["bugs"]
    cnt["bugs_by_preempt"] = dict(by)
    return {"policy": label, "name": name, "return_mean": float(np.mean(rets)), "return_ci95": ci95(rets),
            "returns": rets, "components": {c: float(v) for c, v in zip(COMPONENTS, comps)}, "counters": cnt}


def paired(a: dict, b: dict) -> dict:
    """a - b on the same episodes: mean, 95% interval, and whether a beats b beyond it."""
    d = [x - y for x, y in zip(a["returns"], b["returns"])]
    m, h = float(np.mean(d)), ci95(d)
    return {"mean_diff": m, "ci95": h, "beats": bool(m - (0.0 if math.isnan(h) else h) > 0 and not math.isnan(h))}


def refusals(row: dict, labels_used: Sequence[str]) -> list[str]:
    """What a kernel developer would refuse in a policy: BUGs, RCU stalls, spinning, and
    choices the upstream review refused for a reason outside the reward."""
    c = row["counters"]
    out = []
    if c["episodes_with_bug"]:
        where = ", ".join(f"{n} on preempt={p}" for p, n in sorted(c["bugs_by_preempt"].items()))
        out.append(f"kernel BUGs in {c['episodes_with_bug']} of the held-out episodes ({where})")
    if c["episodes_with_rcu_stall"]:
        out.append(f"RCU stalls in {c['episodes_with_rcu_stall']} of the held-out episodes")
    if (c.get("cpu_burned") or 0.0) > SPIN_REFUSED:
        out.append(f"a CPU spinning in cpu_relax() {100 * c['cpu_burned']:.1f}% of the time")
    for key, why in REVIEW_OBJECTIONS.items():
        if any(key in lab for lab in labels_used):
            out.append(f"it uses {key}(): {why}")
    return out


def profile_report(profile: str, held: dict, choice: dict, learned: dict, patched_label: str,
                   budget: dict) -> dict:
    """The per-profile entry of discover.json (``held``: :func:`heldout_job`; ``choice``:
    :func:`choose_static`; ``budget``: :func:`training_budget`)."""
    w = signed_weights(profile)
    rows = held["actions"]

    def static_row(name: str, lab: str) -> dict:
        r = summarise(name, lab, rows[lab]["heldout"], rows[lab]["counters"], w)
        r["refused"] = refusals(r, [lab])
        return r

    patched = static_row("patched", patched_label)
    best_static = static_row("best_static", choice["best"])
    best_static["selection"] = choice["selection"]
    # the context oracle: on each held-out episode, the choice of that episode's context
    chosen = [choice["per_context"].get(c, choice["best"]) for c in held["contexts"]]
    context_oracle = summarise("context_oracle", "best static per context",
                               [rows[a]["heldout"][i] for i, a in enumerate(chosen)],
                               [rows[a]["counters"][i] for i, a in enumerate(chosen)], w)
    context_oracle["per_context"] = choice["per_context"]
    context_oracle["refused"] = refusals(context_oracle, sorted(set(chosen)))
    lrn = summarise("learned", f"PPO ({learned['train']['steps']} steps)", learned["heldout"], learned["counters"], w)
    lrn["actions_taken"] = learned["actions_taken"]
    lrn["train"] = learned["train"]
    lrn["refused"] = refusals(lrn, [k for k, v in learned["actions_taken"].items() if v > 0.01])
    rule = summarise("rule", "distilled rule", learned["rule_heldout"], learned["rule_counters"], w)
    rule["refused"] = refusals(rule, [])
    cmp = {"learned - patched": paired(lrn, patched), "learned - best_static": paired(lrn, best_static),
           "best_static - patched": paired(best_static, patched), "rule - patched": paired(rule, patched),
           "context_oracle - patched": paired(context_oracle, patched),
           "learned - context_oracle": paired(lrn, context_oracle)}
    accepted = None
    if choice["accepted"] is not None:
        accepted = static_row("best_accepted", choice["accepted"])
        cmp["best_accepted - patched"] = paired(accepted, patched)
        cmp["learned - best_accepted"] = paired(lrn, accepted)
    entry = {"profile": profile, "patched": patched, "best_static": best_static, "learned": lrn,
             "steps_trained": learned["train"]["steps"], **budget,
             "rule": learned["rule"], "rule_agreement": learned["rule_agreement"],
             "rule_agreement_low": learned["rule_agreement"] < RULE_AGREEMENT_MIN,
             "beats_patch": cmp["learned - patched"]["beats"],
             "beats_best_static": cmp["learned - best_static"]["beats"],
             "best_static_beats_patch": cmp["best_static - patched"]["beats"],
             "beats_context_oracle": cmp["learned - context_oracle"]["beats"],
             "rule_policy": rule, "context_oracle": context_oracle, "best_accepted": accepted, "comparisons": cmp,
             "rule_agreement_per_dim": learned["rule_agreement_per_dim"],
             "distill_states": learned["distill_states"], "heldout_states": learned["heldout_states"]}
    entry["findings"] = findings(entry)
    return entry


def findings(e: dict) -> list[str]:
    """The answer either way, in sentences (only what the comparisons show)."""
    c = e["comparisons"]

    def says(key: str, a: str, b: str) -> str:
        x = c[key]
        if x["beats"]:
            verdict = "beats"
        elif x["mean_diff"] + x["ci95"] < 0:
            verdict = "is worse than"
        else:
            verdict = "is within the noise of"
        return f"{a} {verdict} {b} (difference {x['mean_diff']:+.3f} ± {x['ci95']:.3f} per episode, 95% interval)"

    out = [says("learned - patched", "the learned policy", "the patch"),
           says("best_static - patched", f"the best static policy ({e['best_static']['policy']})", "the patch"),
           says("learned - best_static", "the learned (state-dependent) policy", "the best static one")]
    if not (e["beats_patch"] or e["best_static_beats_patch"]):
        out.append("nothing here beats the patch: under this profile the patch is as good as the policies searched")
    refused_win = False
    for key, name in (("learned", "the learned policy"), ("best_static", "the best static policy")):
        row = e[key]
        wins = e["beats_patch"] if key == "learned" else e["best_static_beats_patch"]
        new = [r for r in row["refused"] if r not in e["patched"]["refused"]]
        if wins and new:
            refused_win = True
            out.append(f"{name} wins with what a kernel developer would refuse: " + "; ".join(new))
    if e.get("best_accepted") is not None and (refused_win or e["best_accepted"]["policy"] != e["best_static"]["policy"]):
        what = ("the best static policy a kernel developer would accept (no BUG, RCU stall, spinning or "
                "refused choice on the selection episodes)")
        if e["best_accepted"]["policy"] == e["patched"]["policy"]:
            out.append(f"{what} is the patch itself")
        else:
            out.append(says("best_accepted - patched", f"{what}, {e['best_accepted']['policy']},", "the patch"))
    return out


@dataclass
class DiscoverResult:
    env: str
    actions: Any
    seeds: int
    out: str
    profiles: list[dict]
    static_wall_s: float = 0.0
    wall_s: float = 0.0
    files: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return json.loads(json.dumps({
            "env": self.env, "actions": self.actions, "seeds": self.seeds, "out": self.out,
            "profiles": self.profiles, "static_wall_s": self.static_wall_s, "wall_s": self.wall_s,
            "files": self.files,
            "criteria": {"select_seed": SELECT_SEED, "heldout_seed": HELDOUT_SEED, "distill_seed": DISTILL_SEED,
                         "rule_depth": RULE_DEPTH, "spin_refused": SPIN_REFUSED,
                         "rule_agreement_min": RULE_AGREEMENT_MIN,
                         "beats": "mean paired difference - its 95% interval (Student t) > 0"}},
            allow_nan=True))   # (plain Python values throughout: a numpy value here is a bug)

    def format_text(self) -> str:
        lines = [f"kenv discover {self.env}: {self.seeds} held-out episodes (seeds {HELDOUT_SEED}+), "
                 f"out {self.out}"]
        for e in self.profiles:
            lines += ["", f"profile {e['profile']}", _table(e), training_text(e)]
            if e["rule_agreement_low"]:
                lines.append(agreement_warning(e))
            lines.append("rule (agreement with the network on held-out states "
                         f"{100 * e['rule_agreement']:.1f}%):")
            lines += ["  " + r for r in e["rule"].splitlines()]
            lines += ["- " + f for f in e["findings"]]
        lines.append(f"\nwall time {self.wall_s:.1f}s (static search {self.static_wall_s:.1f}s)")
        return "\n".join(lines)


def agreement_warning(e: dict) -> str:
    """The one line that says a profile's rule does not describe its network."""
    return (f"warning: the rule agrees with the network on only {100 * e['rule_agreement']:.1f}% of "
            f"{e['heldout_states']} held-out states (below {100 * RULE_AGREEMENT_MIN:.0f}%): it does not "
            f"describe the learned policy; it was fitted on {e['distill_states']} states, more --seeds "
            "give it more")


ROWS = ("patched", "best_static", "best_accepted", "context_oracle", "learned", "rule_policy")


def _table(e: dict) -> str:
    head = (f"{'policy':<15} {'choice':<32} {'return ± 95%':>17} {'throughput':>10} {'latency':>8} "
            f"{'spin':>6} {'BUG eps':>7} {'RCU eps':>7} {'CPU burned':>10}")
    lines = [head, "-" * len(head)]
    for key in ROWS:
        r = e.get(key)
        if r is None:
            continue
        c = r["counters"]
        choice = r["policy"] if len(r["policy"]) <= 32 else r["policy"][:31] + "…"
        lines.append(f"{r['name']:<15} {choice:<32} {r['return_mean']:>8.3f} ± {r['return_ci95']:<6.3f} "
                     f"{r['components']['throughput']:>10.3f} {r['components']['latency']:>8.3f} "
                     f"{r['components']['spin']:>6.3f} {c['episodes_with_bug']:>7} {c['episodes_with_rcu_stall']:>7} "
                     f"{100 * (c['cpu_burned'] or 0):>9.2f}%")
    return "\n".join(lines)


def format_markdown(res: DiscoverResult) -> str:
    d = res.to_dict()
    lines = [f"# kenv discover: {res.env}", "",
             f"Held-out episodes: {res.seeds} per policy (seeds {HELDOUT_SEED}+, scenarios drawn from the "
             f"env's mix); the best static policy was chosen on {res.seeds} other episodes (seeds "
             f"{SELECT_SEED}+). Intervals: 95% (Student t); 'beats' compares two policies on the same "
             "episodes (mean paired difference minus its interval > 0).", "",
             "Action set: `" + json.dumps(res.actions) + "`", ""]
    for e in d["profiles"]:
        lines += [f"## profile `{e['profile']}`", "", "```", _table(e), "```", "", training_text(e) + ".", ""]
        if e["rule_agreement_low"]:
            lines += ["**" + agreement_warning(e) + "**", ""]
        lines += [f"Rule (agrees with the network on {100 * e['rule_agreement']:.1f}% of "
                  f"{e['heldout_states']} held-out states; fitted on {e['distill_states']}):", ""]
        lines += [f"- {r}" for r in e["rule"].splitlines()]
        lines += ["", "Findings:", ""] + [f"- {f}" for f in e["findings"]]
        lines += ["", f"Learned policy's actions on the held-out episodes: "
                      + ", ".join(f"`{k}` {100 * v:.0f}%" for k, v in e["learned"]["actions_taken"].items()), ""]
    if res.files.get("png"):
        lines += [f"![trade-off]({os.path.basename(res.files['png'])})", ""]
    return "\n".join(lines)


def write_figure(path: str, res: DiscoverResult) -> None:
    """Per profile: throughput against latency, and against CPU burned; one point per
    policy, the patch marked with a star."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = len(res.profiles)
    fig = Figure(figsize=(10, 3.6 * n), dpi=100)
    FigureCanvasAgg(fig)
    colours = {"patched": "#2ca02c", "best_static": "#000000", "best_accepted": "#9467bd", "context_oracle": "#7f7f7f", "learned": "#1f77b4",
               "rule_policy": "#ff7f0e"}
    for i, e in enumerate(res.profiles):
        for j, (xkey, xlabel) in enumerate((("latency", "latency component (mean per episode)"),
                                            ("cpu", "CPU burned in cpu_relax() (% of the time)"))):
            ax = fig.add_subplot(n, 2, 2 * i + j + 1)
            for key in ROWS:
                r = e.get(key)
                if r is None:
                    continue
                x = r["components"]["latency"] if xkey == "latency" else 100 * (r["counters"]["cpu_burned"] or 0)
                ax.scatter([x], [r["components"]["throughput"]], s=160 if key == "patched" else 50,
                           marker="*" if key == "patched" else "o", color=colours[key],
                           label=f"{r['name']}: {r['policy']}"[:48], zorder=4 if key == "patched" else 3)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("throughput component")
            ax.set_title(f"{res.env} — profile {e['profile']}", fontsize=9)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    save_png(fig, path)


# ------------------------------------------------------------------------- main
def check_seeds(seeds: Any) -> int:
    return check_int(seeds, "--seeds", MIN_SEEDS, MAX_SEEDS, SEEDS_ALLOWED)


def check_steps(steps: Any) -> int | None:
    return check_int(steps, "--steps", 1, MAX_TIMESTEPS, STEPS_ALLOWED, optional=True)


#: argparse ``type=`` of --seeds and --steps: the bounds and words of check_seeds and check_steps
seeds_arg = cli_int(MIN_SEEDS, MAX_SEEDS, allowed=SEEDS_ALLOWED)
steps_arg = cli_int(1, MAX_TIMESTEPS, allowed=STEPS_ALLOWED)


def check_args(env_id: Any, profile: Any, actions: Any, steps: Any, seeds: Any) -> list[str]:
    """Every argument checked before any work; the profiles to run."""
    check_env_id(env_id, "--env")
    check_choice(actions, "--actions", ACTION_SETS)
    check_steps(steps)
    check_seeds(seeds)
    profiles = available_profiles() if profile == "all" else [profile]
    for p in profiles:
        try:
            load_profile(p)
        except ConfigError as e:
            raise ConfigError("--profile", p, f"all, {', '.join(available_profiles())} or a profile YAML "
                              f"path ({e.allowed})") from None
    require_sklearn()
    return profiles


def discover(env_id: str, profile: str = "all", actions: str = "extended", steps: int | None = None,
             seeds: int = DEFAULT_SEEDS, train_seed: int = 0, out: str | None = None, plots: bool = True,
             log: Callable[[str], None] | None = None, workers: int | None = None, ray: str | None = None,
             progress: str | None = None) -> DiscoverResult:
    """See the module docstring."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    profiles = check_args(env_id, profile, actions, steps, seeds)
    env_id = canonical_id(env_id)   # (an old id runs as its new one, as with the CLI's --env)
    workers = check_workers(workers)
    check_ray(ray)
    out = os.path.join("runs", "discover", env_slug(env_id)) if out is None else out
    acts = action_set(env_id, actions)
    make_out_dir(out, "--out")
    with DirLock(out, "--out"):
        remove_stale_tmp(out)
        check_same_run(out, profile, profiles, seeds)
        announce("kenv discover", sum(train_s(env_id, train_setup(env_id, p, actions, train_seed, steps, out)[0]
                                              .n_timesteps) for p in profiles), log)
        check_trainings(env_id, profiles, acts, train_seed, steps, out)
        atomic_write_json(os.path.join(out, ARGS_FILE), run_args(profile, seeds))
        env = _make(env_id, acts)
        patched_label = env.unwrapped.action_label(make_policy("patched", env).action)
        env.close()
        # the static table, then the chosen actions' held-out episodes; beside them, one training per profile
        found: dict[tuple, dict] = {}
        static_path, held_path = os.path.join(out, "static.json"), os.path.join(out, "static_heldout.json")

        def on_done(job: Job, res: dict) -> list[Job]:   # (the driver writes every result)
            if job.key[0] == "learned":
                pdir = os.path.join(out, _profile_slug(job.key[1]))
                if res["files"] is not None:
                    write_tree(os.path.join(pdir, "train"), res["files"])
                res = res["doc"]
                write_cached_doc(os.path.join(pdir, "learned.json"), res)
            elif job.key == ("static",):
                write_cached_doc(static_path, res)
            else:
                write_cached_doc(held_path, res)
            return after(job.key, res)

        def after(key: tuple, res: dict) -> list[Job]:
            found[key] = res
            if key == ("static",):
                log(f"{env_id}: {len(res['actions'])} static actions on {seeds} selection episodes "
                    f"({res['wall_s']:.1f}s)")
                if patched_label not in res["actions"]:   # the oracle's max must include the patch
                    raise RuntimeError(f"{env_id}: the patched action {patched_label} is not among the static "
                                       "actions")
                found["choices"] = {p: choose_static(res, p, patched_label) for p in profiles}
                labels = list(dict.fromkeys(lab for p in profiles
                                            for lab in chosen_labels(found["choices"][p], patched_label)))
                found["labels"] = labels
                prior = cached_doc(held_path, (), static_fingerprint(env_id, acts, seeds))
                return [Job(("heldout",), heldout_job, (env_id, acts, seeds, labels, prior))]
            if key == ("heldout",):
                log(f"{env_id}: {len(found['labels'])} chosen static actions on {seeds} held-out episodes "
                    f"({res['wall_s']:.1f}s)")
            else:
                log(f"{env_id} profile {key[1]}: trained {res['train']['steps']} steps "
                    f"({res['train']['wall_s']:.1f}s), evaluated and distilled ({res['eval_wall_s']:.1f}s)")
            return []

        jobs: list[Job] = []
        cached = cached_static(env_id, acts, seeds, static_path)
        if cached is None:
            jobs.append(Job(("static",), static_job, (env_id, acts, seeds)))
        for p in profiles:
            done = cached_learned(env_id, p, acts, seeds, train_seed, steps, out)
            if done is not None:
                after(("learned", p), done)
                continue
            run_dir = train_setup(env_id, p, acts, train_seed, steps, out)[1].out
            where = (run_dir, None) if ray is None else (None, read_tree(run_dir))   # (job_dir)
            jobs.append(Job(("learned", p), learned_job, (env_id, p, acts, seeds, train_seed, steps, out, *where)))
        if cached is not None:
            jobs += after(("static",), cached)
        run_jobs(jobs, on_done, workers=workers, ray=ray, progress=progress)
        static, held, choices = found[("static",)], found[("heldout",)], found["choices"]
        entries = [profile_report(p, held, choices[p], found[("learned", p)], patched_label,
                                  training_budget(env_id, steps)) for p in profiles]
        res = DiscoverResult(env_id, acts, seeds, out, entries, static["wall_s"] + held["wall_s"])
        res.files = {"json": os.path.join(out, "discover.json"), "md": os.path.join(out, "discover.md")}
        if plots:
            res.files["png"] = os.path.join(out, "discover.png")
            write_figure(res.files["png"], res)
        res.wall_s = time.perf_counter() - t0
        atomic_write_text(res.files["md"], format_markdown(res))
        atomic_write_json(res.files["json"], res.to_dict())
    return res


# -------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    from kenv.envs.registration import env_id_arg
    from kenv.schema import cli_integer, cli_train_seed

    p.add_argument("--env", required=True, type=env_id_arg, help="environment id, e.g. kenv/HwrngWait-v2")
    p.add_argument("--profile", default="all", help="reward profile (balanced, latency, throughput, a YAML path) "
                   "or all (default)")
    p.add_argument("--actions", default="extended", choices=ACTION_SETS,
                   help="the action set searched (default extended: every choice the env offers)")
    p.add_argument("--steps", type=steps_arg, default=None,
                   help="training steps per profile (default: the shipped config's n_timesteps), rounded up to "
                        "whole PPO rollouts of n_envs x n_steps env steps (512; Kernel: 256): --steps 64 trains "
                        "512; the steps trained are in the report and --json (steps_trained)")
    p.add_argument("--seeds", type=seeds_arg, default=DEFAULT_SEEDS,
                   help=f"held-out episodes per policy, and as many selection and distillation episodes "
                        f"(default {DEFAULT_SEEDS}; {SEEDS_ALLOWED})".replace("%", "%%"))
    p.add_argument("--train-seed", type=cli_train_seed, default=0, help="the training run's seed (default 0)")
    p.add_argument("--out", default=None, help="output directory (default runs/discover/<env>); a rerun "
                   "resumes a killed run")
    p.add_argument("--workers", type=cli_integer, default=None,
                   help="processes (default min(2, CPUs)): the static table and each profile's training run "
                        "side by side; results do not depend on it")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="run the jobs as Ray tasks on a cluster (auto: the one this machine belongs to; "
                        "needs kenv-gym[ray]; see docs/scaling.md)")
    p.add_argument("--no-plots", action="store_true", help="do not write discover.png")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run_from_args(args) -> DiscoverResult:
    try:
        return discover(args.env, args.profile, args.actions, args.steps, args.seeds, args.train_seed, args.out,
                        plots=not args.no_plots, workers=args.workers, ray=args.ray, progress="discover")
    except KeyboardInterrupt:
        print(f"kenv discover: interrupted; the same command resumes it (--out {args.out or 'runs/discover/<env>'})",
              file=sys.stderr)
        raise SystemExit(130) from None
