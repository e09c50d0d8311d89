"""``kenv evaluate``: policies side by side on one env, with 95% confidence intervals.

Every policy plays the same seeded episodes (episode i resets with seed
``seed + i``), so the scenarios drawn are the same for all of them.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from kenv.envs.kernel_env import DIMENSIONS
from kenv.envs.record import RecordEpisodes
from kenv.envs.reward import COMPONENTS, load_profile
from kenv.errors import ConfigError, about
from kenv.schema import check_choice, check_int
from kenv.files import TMP_PREFIX, atomic_write_bytes, check_out_path
from kenv.envs.scores import has_score, normalized_score

from .baselines import BASELINES, Policy, make_policy, run_episode
from .estimate import announce, episodes_s

#: two-sided 95% Student t critical values, df = 1..30 (beyond: 1.96)
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def ci95(values: Sequence[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (Student t)."""
    n = len(values)
    if n < 2:
        return float("nan")
    sd = float(np.std(values, ddof=1))
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return t * sd / math.sqrt(n)


@dataclass
class PolicyEval:
    name: str
    returns: list[float]
    components: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def return_ci95(self) -> float:
        return ci95(self.returns)

    def component_means(self) -> dict[str, float]:
        return {c: float(np.mean(v)) for c, v in self.components.items()}

    def to_dict(self) -> dict:
        d = {"name": self.name, "return_mean": self.return_mean, "return_ci95": self.return_ci95,
             "components": self.component_means()}
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class EvalResult:
    env: str
    profile: str
    episodes: int
    policies: list[PolicyEval]
    skipped: dict[str, str] = field(default_factory=dict)

    def score(self, p: PolicyEval) -> float | None:
        """``p``'s normalised score (kenv.envs.scores; None: none for this id or profile)."""
        if not p.returns or not has_score(self.env, self.profile):
            return None
        return normalized_score(self.env, p.returns)

    def to_dict(self) -> dict:
        return {"env": self.env, "profile": self.profile, "episodes": self.episodes,
                "policies": [{**p.to_dict(), "normalized_score": self.score(p)} for p in self.policies],
                "skipped": self.skipped}

    def format_text(self) -> str:
        head = f"{'policy':<10} {'return (mean ± 95% CI)':>22} {'score':>7}  " + " ".join(f"{c:>10}" for c in COMPONENTS)
        lines = [f"{self.env}  profile={self.profile}  episodes={self.episodes}  "
                 f"(± : half-width of the 95% confidence interval of the mean, Student t; "
                 f"components: mean per episode; score: normalised, 0 = random, 100 = oracle, "
                 f"kenv.normalized_score)", head, "-" * len(head)]
        for p in sorted(self.policies, key=lambda p: -p.return_mean):
            cm = p.component_means()
            sc = self.score(p)
            lines.append(f"{p.name:<10} {p.return_mean:>13.3f} ± {p.return_ci95:<6.3f} "
                         + (f"{sc:>7.1f}  " if sc is not None else f"{'-':>7}  ")
                         + " ".join(f"{cm.get(c, 0.0):>10.3f}" for c in COMPONENTS))
        for name, why in self.skipped.items():
            lines.append(f"{name:<10} skipped: {why}")
        return "\n".join(lines)


def evaluate_policy(env: gym.Env, policy: Policy, episodes: int, seed: int = 0) -> PolicyEval:
    ev = PolicyEval(policy.name, [], {c: [] for c in COMPONENTS})
    for i in range(episodes):
        ret, comps, _ = run_episode(env, policy, seed + i)
        ev.returns.append(ret)
        for c in COMPONENTS:
            ev.components[c].append(comps.get(c, 0.0))
    return ev


#: what ``kenv evaluate --actions`` takes: on an env with one decision, and on kenv/Kernel-*
ONE_DECISION_FORM = "one comma-separated list of this env's action values (e.g. {example})"
PER_DECISION_FORM = (f"DECISION=A,B,... once per decision of this env ({', '.join(DIMENSIONS)}; "
                     "e.g. --actions deferral=hardirq,timer --actions wait=cpu_relax,hwrng_yield)")
#: a comma between action names (not the one inside ``usleep_range(MIN,MAX)``)
_NAME_SEP = re.compile(r",(?![^(]*\))")


def parse_actions(values: Sequence[str], per_decision: bool = False,
                  example: Sequence[str] = ("hardirq", "workqueue", "timer")) -> list[str] | dict[str, list[str]]:
    """``kenv evaluate --actions``: the env's ``actions=`` (kenv.subsystems' action names,
    checked by the env) from the flag's values: one ``A,B,...`` for an env with one
    decision (``example``: the env's own action names, for the error); ``per_decision``
    (kenv/Kernel-*, a MultiDiscrete action): one ``DECISION=A,B,...`` per decision."""
    form = PER_DECISION_FORM if per_decision else ONE_DECISION_FORM.format(
        example=",".join(n.replace(" ", "") for n in example))

    def names(text: str, given: str) -> list[str]:
        out = [n.strip() for n in _NAME_SEP.split(text)]
        if not all(out):
            raise ConfigError("actions", given, f"{form}, no name empty")
        return out

    if not per_decision:
        if len(values) != 1 or "=" in values[0]:
            raise ConfigError("actions", values[0] if len(values) == 1 else list(values), form)
        return names(values[0], values[0])
    by_decision: dict[str, list[str]] = {}
    for given in values:
        d, sep, text = given.partition("=")
        if not sep or d.strip() in by_decision or d.strip() not in DIMENSIONS:
            raise ConfigError("actions", given, form)
        by_decision[d.strip()] = names(text, given)
    return by_decision


def _unavailable(base: Any, name: str) -> str:
    """Why baseline ``name`` cannot play on ``base`` (its choice is not in the action set),
    and the ``--actions`` that adds the choice (names without spaces: one shell word each)."""
    choice = getattr(base, name.upper())

    def word(names) -> str:
        return ",".join(dict.fromkeys(n.replace(" ", "") for n in names))

    if isinstance(choice, str):
        return (f"{name} plays {choice!r}, not in this env's action set ({', '.join(base.actions)}); "
                f"add it with --actions {word((*base.actions, choice))}")
    from kenv.envs.kernel_env import DIMENSIONS

    return (f"{name} plays {'|'.join(choice)!r}, not in this env's action sets ("
            + "; ".join(f"{d}: {', '.join(names)}" for d, names in zip(DIMENSIONS, base.actions))
            + "); add it with " + " ".join(f"--actions {d}={word((*names, c))}"
                                         for d, c, names in zip(DIMENSIONS, choice, base.actions)))


def evaluate(env_id: str, policies: Sequence[str] | str = "all", episodes: int = 20, seed: int = 0,
             profile: str = "balanced", env_kwargs: Mapping[str, Any] | None = None,
             extra: Mapping[str, Policy] | None = None, model: str | None = None,
             trust_model: bool = False, record: str | None = None,
             actions: Sequence[str] | None = None) -> EvalResult:
    """Evaluate baselines (by name, or "all") and any ``extra`` policies on ``env_id``;
    ``model``: the path of an SB3 model for this env, scored as the row ``model`` (read
    without unpickling unless ``trust_model``: :mod:`kenv.agents.models`; the policy
    name ``model`` plays that row alone);
    ``record``: write every evaluated episode's record (kenv.RecordEpisodes, JSON Lines)
    to this path, replaced whole at the end (``kenv validate`` replays them);
    ``actions``: the values of ``kenv evaluate --actions`` (:func:`parse_actions`), the
    env's action set.  One baseline asked for by name whose choice is not in the action
    set is a ConfigError naming the ``--actions`` that adds it; with several, it is
    skipped (``skipped``: why, and that ``--actions``)."""
    check_int(episodes, "episodes", 1)
    names = list(BASELINES) if policies == "all" else [policies] if isinstance(policies, str) else list(policies)
    allowed = ", ".join(BASELINES) + ", all, or model (the --model row alone)"
    for n in names:
        check_choice(n, "policy", tuple(BASELINES) + ("model",), allowed)
    names = list(dict.fromkeys(names))   # (a policy named twice is one row: its episodes recorded once)
    if "model" in names:   # (the --model row only: e.g. a records file of its episodes alone)
        if model is None:
            raise ConfigError("policy", "model", f"{allowed}; model needs --model PATH")
        names.remove("model")
    env_kwargs = dict(env_kwargs or {})
    if actions is not None:
        probe = make_env(env_id)
        with about("actions"):
            multi = isinstance(probe.action_space, gym.spaces.MultiDiscrete)
            env_kwargs["actions"] = parse_actions(actions, multi, () if multi else probe.unwrapped.actions)
        probe.close()
        try:   # the action set alone first: an error in it is about the actions
            make_env(env_id, actions=env_kwargs["actions"]).close()
        except ConfigError as e:
            error = ConfigError(e.field if e.field.startswith("actions") else f"actions ({e.field})",
                                e.value, e.allowed)
            error.argument = "actions"
            raise error from None
    with about("profile"):   # checked alone first: a name, or a YAML file whose errors name a key of it
        load_profile(profile)
    env = make_env(env_id, profile=profile, **env_kwargs)
    if model is not None:   # checked before any episode runs
        extra = {**dict(extra or {}), "model": model_policy(model, env, trust_model)}
    announce("kenv evaluate", episodes_s(env_id, episodes * (len(names) + len(extra or {}))))
    out = EvalResult(env_id, env.unwrapped.profile.name, episodes, [])
    tmp = None
    if record is not None:   # checked before any episode runs; replaced whole at the end
        record = check_out_path(record, "record")
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=os.path.basename(record),
                                   dir=os.path.dirname(os.path.abspath(record)))
        os.close(fd)
    try:
        # the evaluated episodes only (not the oracle's search, which runs on ``env``)
        played = RecordEpisodes(env, tmp) if tmp is not None else env
        for n in names:
            try:
                pol = make_policy(n, env, seed=seed)
            except ConfigError:
                why = _unavailable(env.unwrapped, n)
                if isinstance(policies, str) and policies != "all":   # the one policy asked for
                    env.close()
                    raise ConfigError("policy", n, f"a baseline this env can play: {why}") from None
                out.skipped[n] = why
                continue
            out.policies.append(evaluate_policy(played, pol, episodes, seed))
        for name, pol in (extra or {}).items():
            pol.name = name
            out.policies.append(evaluate_policy(played, pol, episodes, seed))
        env.close()
        if tmp is not None:
            with open(tmp, "rb") as f, about("record"):
                atomic_write_bytes(record, f.read(), "record")
    finally:
        if tmp is not None:
            os.unlink(tmp)
    return out


def make_env(env_id: str, **kwargs) -> gym.Env:
    import kenv  # noqa: F401  (registers the ids)

    check_choice(env_id, "env", tuple(sorted(i for i in gym.registry if i.startswith("kenv/"))))
    return gym.make(env_id, **kwargs)


def model_policy(path: str, env: gym.Env, trust: bool = False) -> Policy:
    """The SB3 model at ``path`` (a ``.zip``, or a ``kenv train`` run directory) as a
    deterministic policy for ``env``; a :class:`ConfigError` naming ``--model`` if the
    file is missing, is not an SB3 model, cannot be checked without unpickling (unless
    ``trust``: :mod:`kenv.agents.models`), or was trained on other spaces."""
    from .policy import ModelPolicy, load_model

    return ModelPolicy(load_model(path, env=env, trust=trust), name="model")


