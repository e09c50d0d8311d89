"""``kenv validate PATH``: replay every record of a JSON Lines file (kenv.envs.record)
in a fresh env and check its return, components and length exactly (kenv is
deterministic: a record that does not reproduce was edited, truncated, or made
with other dynamics)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from ..errors import ConfigError
from ..schema import check_all_reward_weights, check_bool
from .base import KERNEL_OPTION_KEYWORDS
from .record import RECORD_FORMAT
from .registration import ENV_IDS, RENAMED, canonical_id, registered_option
from .reward import RewardProfile, available_profiles, load_profile
from .scores import EVAL_EPISODES, SCORE_PROFILE, dynamics_fingerprint, has_score, normalized_score


class BenchmarkRow(NamedTuple):
    """What ``--strict`` makes of one id's valid records: its benchmark row when they are
    the evaluation episodes, seeds 0..EVAL_EPISODES-1, each once, and no record of the
    file fails (``complete``: a failed line may be this id's episode played another way,
    e.g. by another policy of ``kenv evaluate --record``)."""
    env_id: str                      # (the canonical id: an old id's records count as its new id's)
    seeds: list[int]                 # the seeds of its valid records, in order
    complete: bool
    return_mean: float | None        # None unless complete
    normalized_score: float | None   # (kenv.normalized_score of the returns) None unless complete
    failed: int                      # records of the file that fail (any id)

    @classmethod
    def of(cls, env_id: str, returns: dict[int, float], failed: int) -> "BenchmarkRow":
        seeds = sorted(returns)
        # (an id without reference returns, discover's controls, has no score: no row)
        if seeds != list(range(EVAL_EPISODES)) or failed or not has_score(env_id, SCORE_PROFILE):
            return cls(env_id, seeds, False, None, None, failed)
        vals = [returns[s] for s in seeds]
        # (np.mean, as kenv evaluate's return_mean and bench.json's: fsum / n can differ in the last bit)
        return cls(env_id, seeds, True, float(np.mean(vals)), normalized_score(env_id, vals), 0)

    def format_text(self) -> str:
        if self.complete:
            return (f"{self.env_id}: the {EVAL_EPISODES} evaluation episodes: mean return {self.return_mean:.3f}, "
                    f"normalised score {self.normalized_score:.1f}")
        missing = sorted(set(range(EVAL_EPISODES)) - set(self.seeds))
        why = [f"missing seeds {', '.join(map(str, missing))}"] if missing else []
        why += [f"{self.failed} record(s) of the file fail"] if self.failed else []
        why += [] if has_score(self.env_id, SCORE_PROFILE) else ["not a benchmark id: it has no normalised score"]
        return (f"{self.env_id}: {len(self.seeds)} of the {EVAL_EPISODES} evaluation episodes valid "
                f"({'; '.join(why)}): no benchmark row")


@dataclass
class ValidateResult:
    path: str
    lines: list[tuple[int, bool, str]] = field(default_factory=list)   # (line no, ok, message)
    strict: bool = False
    #: --strict: per id with a valid record, in the order of first appearance
    rows: list[BenchmarkRow] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.lines if not ok)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or not self.lines else 0

    def to_dict(self) -> dict:
        return {"path": self.path, "strict": self.strict, "records": len(self.lines), "failed": self.failed,
                "results": [{"line": n, "ok": ok, "message": m} for n, ok, m in self.lines],
                "rows": [r._asdict() for r in self.rows]}

    def format_text(self) -> str:
        out = [f"line {n}: {'ok' if ok else 'FAIL'}: {m}" for n, ok, m in self.lines]
        out.append(f"{self.path}: {len(self.lines) - self.failed} of {len(self.lines)} records valid"
                   + ("" if self.lines else " (no records)"))
        out += [r.format_text() for r in self.rows]
        return "\n".join(out)


#: the fields every record has (kenv.envs.record), with the JSON types they take
FIELDS = MappingProxyType({
    "format": (int,), "env_id": (str,), "kenv_version": (str,), "profile": (str,), "seed": (int,),
    "scenario": (dict,), "actions": (list,), "return": (int, float), "components": (dict,), "length": (int,),
    "terminated": (bool,), "truncated": (bool,)})
_JSON = MappingProxyType({int: "an integer", float: "a number", str: "a string", dict: "an object", list: "a list",
                          bool: "true or false"})


def check_fields(rec: dict) -> str | None:
    """None if every field of a record is there with its JSON type and the format is
    this kenv's, else the first that is not, named (one line)."""
    for name, types in FIELDS.items():
        if name not in rec:
            return f"field {name!r} is missing"
        v = rec[name]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            why = ": the episode cannot be replayed without its reset seed" if name == "seed" else ""
            return f"{name} {v!r} is not {' or '.join(_JSON[t] for t in types)}{why}"
    if rec["format"] != RECORD_FORMAT:
        return f"format {rec['format']!r}: this kenv reads record format {RECORD_FORMAT}"
    dyn = rec.get("dynamics")   # (a record has it from kenv.envs.record; older ones may not)
    if dyn is not None and not isinstance(dyn, str):
        return f"dynamics {dyn!r} is not a string or null (kenv.envs.scores.dynamics_fingerprint)"
    return None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class _Refused(ValueError):
    """An optional field's value the replay cannot take: the one-line reason."""


def _action_set(rec: dict, names) -> dict:
    """``action_set`` (the env was made with ``actions=``): an action is an index into it."""
    return {"actions": names}


def _reward_weights(rec: dict, weights) -> dict:
    """``reward_weights`` (a profile that is not packaged): its weights, under its name;
    never other weights under a packaged profile's name."""
    try:
        weights = check_all_reward_weights(weights)
    except ConfigError as e:
        raise _Refused(str(e)) from None
    profile = rec["profile"]
    if profile in available_profiles() and weights != load_profile(profile).weights:
        raise _Refused(f"reward_weights {rec['reward_weights']!r} are not those of the packaged profile "
                       f"{profile!r} the record names")
    return {"profile": RewardProfile(profile, weights)}


def _scenario_mix(rec: dict, mix) -> dict:
    """``scenario_mix`` (made with ``scenario=``): the mix the seed drew from, as pairs."""
    if not (isinstance(mix, dict) and all(
            isinstance(d, list) and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], (str, int, float))
                                        for p in d) for d in mix.values())):
        raise _Refused(f"scenario_mix {mix!r} is not an object {{field: [[choice, weight], ...]}}")
    return {"scenario": {f: dict(map(tuple, d)) for f, d in mix.items()}}


def _kernel_options(rec: dict, opts) -> dict:
    """``kernel_options`` (``irq_threads=``, ``load_balance=``: the variant's dynamics); only
    kernel options (a record cannot set the env's other keyword arguments)."""
    if not (isinstance(opts, dict) and opts and set(opts) <= set(KERNEL_OPTION_KEYWORDS)
            and all(isinstance(v, bool) for v in opts.values())):
        raise _Refused(f"kernel_options {opts!r} is not an object {{option: true or false}} of the options "
                       + ", ".join(KERNEL_OPTION_KEYWORDS))
    same = [o for o, v in opts.items() if v == registered_option(rec["env_id"], o)]   # (records carry only others)
    if same:
        raise _Refused(f"kernel_options {opts!r}: {', '.join(same)} is {rec['env_id']}'s own setting "
                       "(a record carries only the options its id does not set)")
    return dict(opts)


def _max_episode_steps(rec: dict, n) -> dict:
    """``max_episode_steps`` (made with ``gym.make(..., max_episode_steps=n)``)."""
    if not (_is_int(n) and 1 <= n <= 2**63 - 1):
        raise _Refused(f"max_episode_steps {n!r} is not an integer >= 1")
    return {"max_episode_steps": n}


def _scenario_override(rec: dict, override) -> dict:
    """``scenario_override`` (``reset(options={"scenario": ...})`` forced these fields):
    a reset option, not a gym.make argument."""
    if not (isinstance(override, dict) and override):
        raise _Refused(f"scenario_override {override!r} is not an object {{field: value}} of the fields "
                       "reset(options={'scenario': ...}) forced")
    return {}


class OptionalField(NamedTuple):
    """A field a record has only when its env was not made as its id is (kenv.envs.record):
    what it gives the replay, the gym.make keywords whose refusal it answers for, and the
    note on the ok line (a record with it is not a run of the id's benchmark)."""

    replay: Callable[[dict, Any], dict]
    keywords: tuple[str, ...]
    note: str


#: the optional fields, in the order they are checked
OPTIONAL = MappingProxyType({
    "action_set": OptionalField(_action_set, ("actions",), ""),
    "reward_weights": OptionalField(_reward_weights, ("profile", "reward_weights"), ""),
    "scenario_mix": OptionalField(_scenario_mix, ("scenario",), " (the env's own scenario mix, scenario_mix: not its id's)"),
    "kernel_options": OptionalField(_kernel_options, KERNEL_OPTION_KEYWORDS, " (kernel options {}: not its id's)"),
    "max_episode_steps": OptionalField(_max_episode_steps, ("max_episode_steps",), " (time limit {}: not its id's)"),
    "scenario_override": OptionalField(_scenario_override, (), " (scenario forced by reset options: {})"),
})


def check_record(rec: dict) -> str | None:
    """None if ``rec`` replays exactly, else what differs (one line)."""
    import kenv

    bad = check_fields(rec)
    if bad is not None:
        return bad
    env_id = rec.get("env_id")
    if env_id not in ENV_IDS and env_id not in RENAMED:   # (a record of an old id: same dynamics)
        return f"env_id {env_id!r} is not a kenv id ({', '.join(ENV_IDS)})"
    version, dyn = rec.get("kenv_version"), rec.get("dynamics")
    now = dynamics_fingerprint(env_id)
    other = "" if version == kenv.__version__ and dyn == now else \
        (f" (record made with kenv {version}, dynamics {dyn}; replayed with kenv {kenv.__version__}, "
         f"dynamics {now}" + (": the env's dynamics changed)" if dyn != now else ")"))
    seed = rec["seed"]     # (an integer, check_fields: None would make reset() draw a random episode)
    kwargs: dict = {"profile": rec["profile"]}
    for name, opt in OPTIONAL.items():
        if name in rec:
            try:
                kwargs.update(opt.replay(rec, rec[name]))
            except _Refused as e:
                return str(e)
    try:
        env = gym.make(canonical_id(env_id), **kwargs)   # (an old id: the same env)
    except (ConfigError, KeyError) as e:
        field = str(getattr(e, "field", ""))
        word = re.match(r"\w*", field).group()   # ("scenario: mix.reader_bs", "reward_weights.entropy", ...)
        name = next((n for n, opt in OPTIONAL.items() if n in rec and word in opt.keywords),
                    # (an action set's errors name its decision: "wait", "defer", ...)
                    "action_set" if "action_set" in rec and not field.startswith(("profile", "reward")) else "profile")
        return f"{name} {rec.get(name)!r}: {e}"
    override = rec.get("scenario_override")
    try:
        _, info = env.reset(seed=seed, options=None if override is None else {"scenario": override})
    except ConfigError as e:   # (reset refuses the seed, or the forced scenario: name the field it was)
        if str(getattr(e, "field", "")).startswith("seed"):
            return f"seed {seed!r}: {e}"
        return f"scenario_override {override!r}: {e}"
    if info.get("scenario") != rec.get("scenario"):
        return f"scenario {rec.get('scenario')} != replayed {info.get('scenario')}{other}"
    total, comps, steps = 0.0, {}, 0
    done = term = trunc = False
    for a in rec["actions"]:
        if done:
            return f"{len(rec['actions'])} actions but the episode ended after {steps}{other}"
        # JSON integers only: np.asarray(..., int64) would truncate 1.9 to 1, read "1" and true as
        # 1 (a record the wrapper never writes would pass) and raise on an int past int64
        if _is_int(a):
            act = a
        elif isinstance(a, list) and all(_is_int(x) and -2**63 <= x < 2**63 for x in a):
            act = np.asarray(a, dtype=np.int64)
        else:
            act = None
        if act is None or not env.action_space.contains(act):
            return f"action {a!r} at step {steps} is not in {env.action_space}"
        _, r, term, trunc, info = env.step(act)
        steps += 1
        total += float(r)
        for c, v in info["reward_components"].items():
            comps[c] = comps.get(c, 0.0) + float(v)
        done = term or trunc
    env.close()
    if not done:
        return f"the episode has not ended after the record's {steps} actions (dropped actions?){other}"
    if (term, trunc) != (rec.get("terminated"), rec.get("truncated")):
        return (f"terminated {rec.get('terminated')!r}, truncated {rec.get('truncated')!r} != replayed "
                f"terminated {term!r}, truncated {trunc!r}{other}")
    if steps != rec.get("length"):
        return f"length {rec.get('length')} != replayed {steps}{other}"
    if total != rec.get("return"):
        return f"return {rec.get('return')!r} != replayed {total!r}{other}"
    if comps != rec.get("components"):
        return f"components {rec.get('components')} != replayed {comps}{other}"
    return None


#: the fields a record may have beside FIELDS and OPTIONAL
OTHER_FIELDS = ("dynamics",)


def not_the_benchmark(rec: dict) -> str | None:
    """None if a record that replays is an episode of its id's benchmark (``--strict``): the
    id as registered (no optional field), the profile scores are for, one of the evaluation
    episodes' seeds, no field a record does not have; else why not (one line)."""
    head = f"{rec['env_id']} seed {rec['seed']} replays, but"
    extra = [n for n in OPTIONAL if n in rec]
    if extra:
        return f"{head} not as its id is registered: {', '.join(extra)} (--strict: a benchmark's episodes have none)"
    if rec["profile"] != SCORE_PROFILE:
        return f"{head} under profile {rec['profile']!r} (--strict: a benchmark's episodes use {SCORE_PROFILE!r})"
    if not 0 <= rec["seed"] < EVAL_EPISODES:   # (a seed picked after the fact: its best episodes)
        return f"{head} is not an evaluation episode (--strict: a benchmark's episodes are seeds 0..{EVAL_EPISODES - 1})"
    unknown = sorted(set(rec) - set(FIELDS) - set(OPTIONAL) - set(OTHER_FIELDS))
    if unknown:
        return f"{head} has fields a record does not: {', '.join(unknown)} (--strict)"
    return None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    """A JSON object as a dict, refusing a key given twice: json keeps the last value, other
    readers of a records file may keep the first (a record claiming two returns would pass)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"key {k!r} appears twice in one object: a record gives each field once")
        out[k] = v
    return out


def validate(path: str, strict: bool = False) -> ValidateResult:
    """Replay every record of ``path``.  ``strict``: a record that replays but is not an
    episode of its id's benchmark (:func:`not_the_benchmark`), or is an episode an earlier
    line gave, fails too, and the valid records of each id make its :class:`BenchmarkRow`."""
    if not path:   # (open('') names no file: the error would not say what was given)
        raise ConfigError("path", path, "a records file: the path of a JSON Lines file (kenv evaluate --record, "
                          "kenv.RecordEpisodes)")
    out = ValidateResult(path, strict=check_bool(strict, "strict"))
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:   # (UTF-16, as PowerShell's > writes, or not text at all)
        utf16 = " (it starts with a UTF-16 byte order mark)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ConfigError("path", path, f"a records file in UTF-8 (byte {e.start} is not UTF-8{utf16}): "
                          "a JSON Lines file (kenv evaluate --record, kenv.RecordEpisodes)") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")   # (the newlines open()'s text mode read)
    lines = text.split("\n")
    played: dict = {}   # (canonical id, seed) -> the line of its first --strict record
    returns: dict[str, dict[int, float]] = {}   # canonical id -> seed -> return, of the valid --strict records
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKey as e:
            out.lines.append((n, False, str(e)))
            continue
        except RecursionError:   # (json's decoder recurses per nesting level: not a ValueError)
            out.lines.append((n, False, "JSON nested deeper than a record is (not a kenv record)"))
            continue
        except json.JSONDecodeError:
            out.lines.append((n, False, "starts with a UTF-8 byte order mark: a records file is UTF-8 without one"
                              if line.startswith("\ufeff") else "not a whole JSON record (a truncated file?)"))
            continue
        except ValueError as e:   # (whole JSON Python will not read: an integer of over 4,300 digits)
            out.lines.append((n, False, f"not a kenv record: {str(e).split(';')[0]}"))
            continue
        if not isinstance(rec, dict):
            out.lines.append((n, False, f"JSON {_JSON.get(type(rec), 'null')}, not a record (an object)"))
            continue
        if n == len(lines) and not text.endswith("\n"):
            out.lines.append((n, False, "the last line has no newline (a truncated file?)"))
            continue
        try:
            why = check_record(rec)
        except (KeyError, TypeError, ValueError) as e:
            why = f"malformed record: {type(e).__name__}: {e}"
        forced = "".join(opt.note.format(rec[name]) for name, opt in OPTIONAL.items() if name in rec)
        if why is None and strict:
            why = not_the_benchmark(rec)
            episode = (canonical_id(rec["env_id"]), rec["seed"])   # (an old id: the same episodes)
            if why is None and episode in played:   # (the same episode twice: its best return, repeated)
                why = (f"{rec['env_id']} seed {rec['seed']} replays, but line {played[episode]} is the same "
                       "episode (--strict: a benchmark plays each evaluation episode once)")
            played.setdefault(episode, n)
            if why is None:
                returns.setdefault(episode[0], {})[episode[1]] = rec["return"]
        out.lines.append((n, why is None, why or f"{rec['env_id']} seed {rec['seed']} return {rec['return']!r}{forced}"))
    out.rows = [BenchmarkRow.of(env_id, r, out.failed) for env_id, r in returns.items()]
    return out
