"""Fuzzing kenv's boundary (issue #28): constructor arguments, reset(options=...)
scenarios, wait strings, actions and YAML files.

Every exception must be a ConfigError; nothing may hang (each case runs under
a timer that raises); what is accepted must make sense (finite rewards,
observations inside the Box, latency >= 0).  Bounded for the suite; the long
run raises the number of examples:

    KENV_FUZZ_EXAMPLES=2000 KENV_FUZZ_REPORT=/tmp/fuzz.json nice python -m pytest -q tests/test_fuzz_boundary.py

(KENV_FUZZ_REPORT: counts of inputs tried, clear errors, other exceptions and hangs, per target.)
"""

from __future__ import annotations

import atexit
import json
import math
import os
import signal
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kenv.drivers.hwrng import WAIT_ARG_MAX, parse_wait
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.envs.raid6_bench import Raid6BenchEnv
from kenv.envs.random_mix import RandomMixEnv
from kenv.envs.reward import COMPONENTS, load_profile
from kenv.errors import ConfigError
from kenv.sim.engine import Engine, SimulationError, check_period

EXAMPLES = int(os.environ.get("KENV_FUZZ_EXAMPLES", "0"))
CASE_TIMEOUT_S = float(os.environ.get("KENV_FUZZ_TIMEOUT", "20"))
COUNTS: dict[str, Counter] = {}
ENVS = [RandomMixEnv, HwrngWaitEnv, Raid6BenchEnv, KernelEnv]


def fuzz_settings(n: int):
    return settings(max_examples=EXAMPLES or n, deadline=None, derandomize=not EXAMPLES,
                    suppress_health_check=list(HealthCheck), database=None)


def _report():
    path = os.environ.get("KENV_FUZZ_REPORT")
    if path and COUNTS:
        with open(path, "w") as f:
            json.dump({k: dict(v) for k, v in COUNTS.items()}, f, indent=1)


atexit.register(_report)


class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang()


def run_case(target: str, fn, *args):
    """``fn(*args)`` under a timer: returns its result, or None after a
    ConfigError; any other exception, or a hang, fails the case."""
    c = COUNTS.setdefault(target, Counter())
    c["tried"] += 1
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT_S)
    try:
        out = fn(*args)
        c["accepted"] += 1
        return out
    except ConfigError:
        c["clear_error"] += 1
        return None
    except Hang:
        c["hang"] += 1
        _report()
        raise AssertionError(f"{target}: no answer within {CASE_TIMEOUT_S} s for {args!r:.300}") from None
    except Exception:
        c["other_exception"] += 1
        _report()
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------- strategies

def junk():
    return st.one_of(
        st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12), st.binary(max_size=6), st.lists(st.integers(-3, 3), max_size=3),
        st.dictionaries(st.text(max_size=4), st.integers(-3, 3), max_size=2), st.just(10**400))


def scenario_values(env_cls):
    """Per field: a listed choice, a near miss (0, -5, 2**64, inf, a string of a number), or junk."""
    fields = list(env_cls.VERSIONS[0].scenario_fields)
    near = st.sampled_from([0, -5, 2**64, math.inf, math.nan, 1e-9, "5", "", 5.0, 100.0, True])
    value = st.one_of(
        *[st.sampled_from(list(c)) for c in env_cls.VERSIONS[0].scenario_fields.values()], near, junk())
    key = st.one_of(st.sampled_from(fields), st.text(max_size=6))
    return st.dictionaries(key, value, max_size=4)


def weights():
    w = st.one_of(st.floats(0, 10), st.floats(allow_nan=True, allow_infinity=True), junk())
    return st.one_of(st.none(), st.dictionaries(st.one_of(st.sampled_from(COMPONENTS), st.text(max_size=5)),
                                                w, max_size=3), junk())


WAITS = st.one_of(
    st.sampled_from(["cpu_relax", "cpu_relax()", "hwrng_yield", "hwrng_msleep(1000)", "usleep_range(100,200)"]),
    st.builds(lambda n: f"hwrng_msleep({n})", st.one_of(st.integers(-10, 2**70), st.text(max_size=4))),
    st.builds(lambda a, b: f"usleep_range({a},{b})", st.integers(-5, 2**40), st.integers(-5, 2**40)),
    st.text(max_size=24))


def actions_for(env_cls):
    names = list(env_cls.DEFAULT_ACTIONS) + list(getattr(env_cls, "EXTENDED_ACTIONS", ()))
    if env_cls is KernelEnv:
        return st.one_of(st.none(), junk(), st.dictionaries(
            st.sampled_from(["random", "hwrng", "raid6", "bogus"]),
            st.lists(st.one_of(WAITS, st.sampled_from(["timer", "workqueue", "preempt_disable",
                                                       "migrate_disable"])), max_size=3), max_size=3))
    item = st.one_of(st.sampled_from(names) if names else st.nothing(), WAITS, junk())
    return st.one_of(st.none(), st.lists(item, max_size=4), item)


def kwargs_for(env_cls):
    return st.fixed_dictionaries({}, optional={
        "actions": actions_for(env_cls),
        "scenario": st.one_of(scenario_values(env_cls), junk(), st.sampled_from(["no-such-mix", ""])),
        "profile": st.one_of(st.sampled_from(["balanced", "latency", "throughput", "nope", ""]), junk()),
        "reward_weights": weights(),
        "render_mode": st.one_of(st.sampled_from([None, "ansi", "rgb_array", "human"]), junk()),
    })


# ------------------------------------------------------------- checks

def check_steps(env, steps: int = 2) -> None:
    """What an accepted configuration must do: steps with finite rewards,
    observations inside the Box, a latency >= 0 and a throughput >= 0."""
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert math.isfinite(r), (r, info.get("scenario"))
        assert env.observation_space.contains(obs), (obs, info.get("scenario"))
        if "latency_us" in info:
            assert info["latency_us"] >= 0, info
        assert info["reward_components"]["throughput"] >= 0, info
        if term:
            break


def _construct_and_run(env_cls, kwargs):
    env = env_cls(**kwargs)
    env.action_space.seed(0)
    env.reset(seed=0)
    check_steps(env)
    return env


@pytest.mark.parametrize("env_cls", ENVS, ids=lambda c: c.__name__)
def test_constructor_kwargs(env_cls):
    @fuzz_settings(12)
    @given(kwargs_for(env_cls))
    def run(kwargs):
        run_case(f"constructor {env_cls.__name__}", _construct_and_run, env_cls, kwargs)

    run()


@pytest.mark.parametrize("env_cls", ENVS, ids=lambda c: c.__name__)
def test_reset_options(env_cls):
    env = env_cls()
    env.action_space.seed(0)
    options = st.one_of(st.fixed_dictionaries({"scenario": scenario_values(env_cls)}),
                        st.dictionaries(st.text(max_size=8), junk(), max_size=2), junk())

    def reset_and_step(opts, seed):
        env.reset(seed=seed, options=opts)
        check_steps(env)

    @fuzz_settings(15)
    @given(options, st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([None, -1, 2**64, 1.5, "1", True])))
    def run(opts, seed):
        run_case(f"reset options {env_cls.__name__}", reset_and_step, opts, seed)

    run()


@fuzz_settings(200)
@given(WAITS)
def test_wait_strings(text):
    w = run_case("wait string", parse_wait, text)
    if w is not None:
        assert all(0 <= a <= WAIT_ARG_MAX for a in w.args)
        assert parse_wait(str(w)) == w


@pytest.mark.parametrize("env_cls", ENVS, ids=lambda c: c.__name__)
def test_actions(env_cls):
    env = env_cls()
    env.reset(seed=0)
    acts = st.one_of(junk(), st.integers(-3, 5), st.lists(st.integers(-1, 3), max_size=4),
                     st.lists(st.lists(st.integers(0, 2), max_size=3), max_size=3),
                     st.builds(np.array, st.lists(st.integers(-1, 3), min_size=3, max_size=3)))

    @fuzz_settings(30)
    @given(acts)
    def run(a):
        out = run_case(f"step action {env_cls.__name__}", env.step, a)
        if out is not None:
            assert math.isfinite(out[1]) and env.observation_space.contains(out[0])

    run()


def yaml_text():
    data = st.recursive(st.one_of(junk().filter(lambda x: not isinstance(x, bytes)), st.sampled_from(
        ["balanced", "kenv/HwrngWait-v2", "platform", "rpi3bplus", 16, 1e400, "1e400"])),
        lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(
            st.sampled_from(["name", "description", "weights", "env", "mix", "entropy", "throughput", "latency",
                             "rcu_stall", "bug", "spin", "platform", "reader_bs", "hz", "x"]), ch, max_size=6)),
        max_leaves=12)
    import yaml

    def dump(d):
        try:
            return yaml.safe_dump(d).encode()
        except Exception:  # noqa: BLE001 - what safe_dump refuses is just not a case
            return b"{}"
    weight = st.one_of(st.floats(0, 10), st.integers(0, 5), st.sampled_from([1e6, 1e7, -1, 1e400, "1", None]))
    # near-valid files: a weight per component (some bad, some missing or extra),
    # a mix of the env's choices (some weights bad)
    profile = st.fixed_dictionaries(
        {"weights": st.one_of(st.fixed_dictionaries({c: weight for c in COMPONENTS}),
                              st.dictionaries(st.sampled_from(COMPONENTS + ("joy",)), weight, max_size=7))},
        optional={"name": st.one_of(st.text(max_size=8), junk()), "description": st.text(max_size=20)})
    choice_fields = {f: st.one_of(st.sampled_from(list(c)), st.dictionaries(st.sampled_from(list(c)), weight,
                                                                            max_size=3))
                     for f, c in HwrngWaitEnv.VERSIONS[0].scenario_fields.items()}
    mix = st.fixed_dictionaries(
        {"mix": st.one_of(st.fixed_dictionaries({}, optional=choice_fields), scenario_values(HwrngWaitEnv))},
        optional={"env": st.sampled_from(["kenv/HwrngWait-v2", "kenv/Raid6Bench-v3", 5]),
                  "name": st.text(max_size=8), "extra": st.integers()})
    return st.one_of(data.map(dump), profile.map(dump), mix.map(dump), st.binary(max_size=40),
                     st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")))


def test_yaml_files(tmp_path):
    path = tmp_path / "fuzz.yaml"

    def load_both(p):
        load_profile(str(p))

    def load_mix(p):
        HwrngWaitEnv(scenario=str(p)).reset(seed=0)

    @fuzz_settings(60)
    @given(yaml_text())
    def run(raw):
        path.write_bytes(raw)
        run_case("yaml reward profile", load_both, path)
        run_case("yaml scenario mix", load_mix, path)

    run()


# ------------------------------------------------------- issue #28 cases

@pytest.mark.parametrize("scenario", [{"reader_bs": 0}, {"step_ms": 0}, {"step_ms": -5}, {"step_ms": 2**64},
                                      {"platform": {}}, {"hz": math.inf}, {"msg_size": "x"}, {"bogus": 1}])
def test_hang_and_crash_scenarios_of_issue_28_are_config_errors(scenario):
    env = KernelEnv()
    errors = []

    def reset():
        try:
            env.reset(seed=0, options={"scenario": scenario})
        except ConfigError as e:
            errors.append(e)
    run_case("issue 28", reset)     # (under the timer: these hung before)
    assert len(errors) == 1 and "options.scenario." in str(errors[0])


def test_scenario_choices_keep_working_through_reset_options():
    """The agents force contexts of the mix through reset(options=...): every listed choice passes."""
    env = HwrngWaitEnv()
    for field, choices in HwrngWaitEnv.VERSIONS[0].scenario_fields.items():
        for c in choices:
            env.reset(seed=0, options={"scenario": {field: c}})
            assert env._scenario[field] == c


def test_negative_latency_of_issue_28_is_gone():
    """HZ=100 (a 10 ms tick) with 5 ms steps: the client's first round trip
    may begin after the first step ends; that step measured nothing (0), it
    did not wait a negative time (was -10.48 us, reward -48.44)."""
    env = RandomMixEnv(scenario={"hz": 100, "step_ms": 5, "msg_size": "1024K", "preempt": "rt", "threshold": 64})
    env.reset(seed=655)
    _, r, _, _, info = env.step(0)
    assert info["latency_us"] >= 0 and r >= 0
    assert info["round_trips"] == 0 and info["latency_us"] == 0


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(st.sampled_from([RandomMixEnv, KernelEnv]), st.sampled_from([100, 250, 300, 1000, "platform"]),
       st.sampled_from([5, 10, 20]), st.sampled_from(["4K", "64K", "1024K"]), st.integers(0, 10_000))
def test_latency_and_throughput_never_negative(env_cls, hz, step_ms, size, seed):
    env = env_cls(scenario={"hz": hz, "step_ms": step_ms, "msg_size": size})
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(3):
        _, r, _, _, info = env.step(env.action_space.sample())
        assert info["latency_us"] >= 0
        assert info["reward_components"]["throughput"] >= 0
        assert math.isfinite(r)
        if env_cls is RandomMixEnv:   # clean / measured latency: no round trip beats the undisturbed one
            assert info["reward_components"]["throughput"] <= 1.0 + 1e-9, info


def test_round_trip_begun_just_before_a_step_end_is_no_speedup():
    """HZ=100, 5 ms steps, 1 MiB messages: a step in which the first round
    trip began late and did not complete reported a few-us latency, a
    throughput reward up to 7.5 (the undisturbed round trip scores 1)."""
    env = RandomMixEnv(scenario={"hz": 100, "step_ms": 5, "msg_size": "1024K"})
    worst = 0.0
    for seed in range(12):
        env.reset(seed=seed)
        for _ in range(2):
            worst = max(worst, env.step(0)[4]["reward_components"]["throughput"])
    assert 0.5 < worst <= 1.0 + 1e-9


def test_engine_refuses_the_past_zero_periods_and_stalls():
    eng = Engine()
    eng.run(until=10)
    with pytest.raises(SimulationError):
        eng.at(5, lambda: None)
    for bad in (0, -1, 1.5):
        with pytest.raises(SimulationError):
            check_period(bad)

    def again():
        eng.after(0, again)    # a loop that never advances the clock
    eng.after(0, again)
    with pytest.raises(SimulationError, match="without simulated time advancing"):
        run_case("engine stall", eng.run)   # (under the timer)


def test_zero_period_load_refused_before_it_runs():
    from kenv.workloads.load import parse_load

    for spec in ("1e-7/2e-7", "1/inf", "nan/1", "1/1e300"):
        with pytest.raises(ConfigError):
            parse_load(spec)
