"""kenv in the RL clients people run: Gymnasium's vector envs (sync and async, both
autoreset modes), SB3's make_vec_env (an id string, and SubprocVecEnv), Gymnasium's
standard wrappers, and the info contract they all depend on (issue 27).

Every registered id (kenv.envs.registration.ENV_IDS) runs its share of a few hundred
steps per test (the budget set for the four base tasks' ids, shared by all; at least enough for
its episodes to end) with random actions and random scenarios: a mix
uniform over every choice of each of the env's scenario fields, so that episodes
draw platforms, preemption models, HZ values ... that the default mixes never do.
A crash in an async worker must fail the test, not hang it: every call to an async
vector env has a timeout, and a test crashes a worker on purpose.
(RLlib, TorchRL, Tianshou and CleanRL: examples/, and their own tests.)
"""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import kenv  # noqa: F401  (registers the ids)
from kenv.envs.registration import ENV_IDS

#: the ids the step budgets below were set for: with more registered, each test's budget
#: is shared among them (:func:`steps`), so the file's run time stays what it was
BUDGET_IDS = 4
#: seconds an async vector env may take for one call before the test fails
TIMEOUT_S = 60


def steps(env_id: str, budget: int, episodes: int = 0) -> int:
    """An id's share of a test's ``budget`` of steps (set for BUDGET_IDS ids), but at
    least enough for ``episodes`` episodes of the env's length to end."""
    return max(budget * BUDGET_IDS // len(ENV_IDS), episodes * gym.spec(env_id).max_episode_steps + 1)


def uniform_mix(env_id: str) -> dict:
    """A scenario mix uniform over every allowed choice of every field of ``env_id``
    (the instance's fields: a version's keyword arguments may add some)."""
    env = gym.make(env_id)
    fields = env.unwrapped.version.scenario_fields
    env.close()
    return {f: {c: 1.0 for c in choices} for f, choices in fields.items()}


def signature(info: dict) -> dict:
    """Each key's type (dicts: their keys' types; arrays: dtype and shape)."""
    out = {}
    for k, v in info.items():
        if isinstance(v, dict):
            out[k] = signature(v)
        elif isinstance(v, np.ndarray):
            out[k] = ("ndarray", v.dtype.str, v.shape)
        else:
            out[k] = type(v)
    return out


def _scalars(info: dict):
    for k, v in info.items():
        if isinstance(v, dict):
            yield from _scalars(v)
        else:
            yield k, v


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_info_has_the_same_keys_and_types_at_every_reset_and_step(env_id):
    """The contract every client relies on, over (a share of) 300 steps of random actions and
    scenarios forced with reset(options={"scenario": ...}): no None, no NaN, no
    variable-length list, the declared keys (kenv.envs.info: the docstring's table, see
    tests/test_doctables.py) are every key."""
    env = gym.make(env_id)
    fields = env.unwrapped.version.scenario_fields
    rng = np.random.default_rng(0)
    env.action_space.seed(0)

    def draw():
        return {f: choices[int(rng.integers(len(choices)))] for f, choices in fields.items()}

    _, info = env.reset(seed=0, options={"scenario": draw()})
    ref = signature(info)
    assert set(info["scenario"]) == set(fields)
    assert set(info) == {k for e in env.unwrapped.info_entries() for k in e.keys}
    episodes = 1
    for i in range(steps(env_id, 300, episodes=2)):
        _, _, term, trunc, info = env.step(env.action_space.sample())
        assert signature(info) == ref, i
        for k, v in _scalars(info):
            assert v is not None, k
            assert not isinstance(v, (list, tuple)), k
            if isinstance(v, (float, np.ndarray)) and np.asarray(v).dtype.kind == "f":
                assert np.isfinite(v).all(), (k, v)
        if term or trunc:
            _, info = env.reset(seed=i, options={"scenario": draw()})
            assert signature(info) == ref
            episodes += 1
    assert episodes >= 3   # the resets were checked too
    env.close()


def _check_vector_info(info: dict, num_envs: int, ref_types: dict) -> None:
    """Every key of a vector env's info is an array over the envs (strings in object
    arrays, numbers in numeric ones), present for every env."""
    for k, v in info.items():
        if k.startswith("_") or k in ("final_obs", "final_info", "episode"):
            continue
        if isinstance(v, dict):
            _check_vector_info(v, num_envs, ref_types[k])
            continue
        assert isinstance(v, np.ndarray) and v.shape[0] == num_envs, k
        assert info[f"_{k}"].all(), k
        if ref_types[k] is str:
            assert all(isinstance(x, str) for x in v), k
        else:
            assert v.dtype.kind in "biuf", (k, v.dtype)


def _masks(info: dict):
    for k, v in info.items():
        if isinstance(v, dict):
            yield from _masks(v)
        elif k.startswith("_"):
            yield k, v


def _bounded(fn, seconds: float = 3 * TIMEOUT_S):
    """``fn()``, failing the test if it has not returned after ``seconds``."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"no return after {seconds} s (hung)")
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _run_vector(env_id: str, mode: str, autoreset: AutoresetMode, steps: int) -> int:
    """``steps`` random steps of a 2-env vector env; returns the episodes finished."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    kwargs = {"autoreset_mode": autoreset}
    v = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs,
                     scenario=uniform_mix(env_id))
    if mode == "sync":
        v = RecordEpisodeStatistics(v)   # (async: the raw calls, each with a timeout)
    ok = False
    try:
        single = gym.make(env_id)
        _, info0 = single.reset(seed=0)
        ref_types = signature(info0)
        single.close()
        if mode == "async":
            v.reset_async(seed=7)
            obs, info = v.reset_wait(timeout=TIMEOUT_S)
        else:
            obs, info = v.reset(seed=7)
        v.action_space.seed(7)
        _check_vector_info(info, 2, ref_types)
        finished = 0
        for _ in range(steps):
            a = v.action_space.sample()
            if mode == "async":
                v.step_async(a)
                obs, r, term, trunc, info = v.step_wait(timeout=TIMEOUT_S)
            else:
                obs, r, term, trunc, info = v.step(a)
            assert v.observation_space.contains(obs)
            _check_vector_info(info, 2, ref_types)
            done = term | trunc
            if done.any():
                finished += int(done.sum())
                if mode == "sync":
                    assert (info["_episode"] == done).all() and (info["episode"]["l"][done] > 0).all()
                if autoreset == AutoresetMode.SAME_STEP:
                    # the finished episodes' last obs and info, beside the new episodes' first
                    assert (info["_final_info"] == done).all()
                    for i in np.flatnonzero(done):
                        assert v.single_observation_space.contains(info["final_obs"][i])
                    for k, mask in _masks(info["final_info"]):
                        assert (mask == done).all(), k
        ok = True
        return finished
    finally:
        if mode == "async":
            v.close(timeout=TIMEOUT_S, terminate=not ok)
        else:
            v.close()


#: each id with one autoreset mode in sync vector envs and the other in async ones (both
#: modes for every id, both vectorisations for every mode, half the runs of all pairs)
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
SYNC_MODES = [(e, MODES[i % 2]) for i, e in enumerate(ENV_IDS)]
ASYNC_MODES = [(e, MODES[(i + 1) % 2]) for i, e in enumerate(ENV_IDS)]


def _mode_id(v):
    return v.name if isinstance(v, AutoresetMode) else v


@pytest.mark.parametrize("env_id, autoreset", SYNC_MODES, ids=_mode_id)
def test_make_vec_sync_runs_random_scenarios(env_id, autoreset):
    finished = _run_vector(env_id, "sync", autoreset, steps=steps(env_id, 150, episodes=1))
    assert finished >= 2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_dict_info_to_list_gives_each_env_the_single_env_keys(env_id):
    """DictInfoToList (what RLlib's env runners apply to a vector env) gives back,
    per env, an info with the keys of a single env's info."""
    from gymnasium.wrappers.vector import DictInfoToList

    single = gym.make(env_id)
    keys = set(single.reset(seed=0)[1])
    single.close()
    v = DictInfoToList(gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", scenario=uniform_mix(env_id)))
    _, infos = v.reset(seed=5)
    v.action_space.seed(5)
    for _ in range(steps(env_id, 100, episodes=1)):
        assert [set(i) for i in infos] == [keys, keys]
        *_, infos = v.step(v.action_space.sample())
    v.close()


@pytest.mark.slow
@pytest.mark.parametrize("env_id, autoreset", ASYNC_MODES, ids=_mode_id)
def test_make_vec_async_runs_random_scenarios(env_id, autoreset):
    finished = _bounded(lambda: _run_vector(env_id, "async", autoreset, steps=steps(env_id, 150, episodes=1)))
    assert finished >= 2


class _CrashAt(gym.Wrapper):
    """Raises in the ``n``-th step (a bug in a worker)."""

    def __init__(self, env, n: int):
        super().__init__(env)
        self.n = n

    def step(self, action):
        self.n -= 1
        if self.n == 0:
            raise RuntimeError("worker crashed on purpose")
        return self.env.step(action)


@pytest.mark.filterwarnings("ignore::UserWarning")   # gymnasium relays the worker's error as warnings too
def test_a_crash_in_an_async_worker_fails_fast_and_close_returns():
    from gymnasium.vector import AsyncVectorEnv

    def run():
        v = AsyncVectorEnv([lambda: gym.make("kenv/Raid6Bench-v3"),
                            lambda: _CrashAt(gym.make("kenv/Raid6Bench-v3"), 3)])
        try:
            v.reset_async(seed=0)
            v.reset_wait(timeout=TIMEOUT_S)
            with pytest.raises(RuntimeError, match="crashed on purpose"):
                for _ in range(5):
                    v.step_async(v.action_space.sample())
                    v.step_wait(timeout=TIMEOUT_S)
        finally:
            v.close(timeout=TIMEOUT_S, terminate=True)
        return v.closed

    assert _bounded(run, seconds=2 * TIMEOUT_S)


@pytest.mark.parametrize("autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_a_config_error_in_an_async_worker_arrives_as_itself_and_close_returns(autoreset):
    """kenv's own error, raised in a worker, crosses the pipe: it used to fail to
    unpickle (an unrelated TypeError in the parent) and close() then hung (issue #39)."""
    import time

    from kenv.errors import ConfigError

    def run():
        v = gym.make_vec("kenv/Raid6Bench-v3", 2, vectorization_mode="async",
                         vector_kwargs={"autoreset_mode": autoreset})
        try:
            with pytest.raises(ConfigError, match="preempt: got 'bogus'"):
                v.reset(seed=0, options={"scenario": {"preempt": "bogus"}})
        finally:
            t0 = time.monotonic()
            v.close()
            took = time.monotonic() - t0
        return took

    assert _bounded(run, seconds=2 * TIMEOUT_S) < 1.0


def test_every_kenv_exception_pickles_with_its_message_and_fields():
    import pickle

    from kenv.errors import ConfigError, UnknownKeywordError
    from kenv.sim.engine import SimulationError

    errors = [ConfigError("scenario.preempt", "bogus", "none, voluntary, full, rt"),
              ConfigError("reward_weights", {"entropy": [1, 2]}, "a mapping of floats"),
              ConfigError("actions", lambda: 0, "a list of names"),   # an unpicklable value: its repr crosses
              UnknownKeywordError("frameskip", 1, "none: this env takes no frameskip"),
              UnknownKeywordError("frameskip: got 1; allowed: ... was raised from the environment creator"),
              ConfigError(ConfigError("preempt", "bogus", "rt")),
              SimulationError("event at -1 ns: in the past")]
    for e in errors:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
        if isinstance(e, ConfigError):
            assert (back.field, back.allowed) == (e.field, e.allowed)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_an_unknown_keyword_is_the_type_error_clients_fall_back_on(env_id):
    """TorchRL's GymEnv passes frameskip=1 to every env and retries without it only on a
    TypeError saying ``unexpected keyword argument 'frameskip'``; kenv's error is also a
    ConfigError naming the field, the value and the env's keyword arguments."""
    from kenv.errors import ConfigError

    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'") as info:
        gym.make(env_id, frameskip=1)
    # gym.make re-raises a creator's TypeError as type(e)(f"{e} was raised ..."), from e
    err = info.value.__cause__ or info.value
    assert isinstance(info.value, ConfigError) and isinstance(err, ConfigError) and err.field == "frameskip"
    assert "got 1" in str(info.value) and "keyword arguments:" in str(info.value)


def _run_sb3(venv, steps: int) -> int:
    venv.seed(3)
    venv.reset()
    n = venv.num_envs
    finished = 0
    for _ in range(steps):
        actions = np.array([venv.action_space.sample() for _ in range(n)])
        obs, rewards, dones, infos = venv.step(actions)
        assert obs.shape == (n, *venv.observation_space.shape) and np.isfinite(rewards).all()
        for d, info in zip(dones, infos):
            if d:
                finished += 1
                assert "episode" in info and "terminal_observation" in info   # Monitor and VecEnv
    venv.close()
    return finished


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_make_vec_env_with_an_id_string(env_id):
    """An id string, as in SB3's docs: SB3 passes render_mode="rgb_array"."""
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"scenario": uniform_mix(env_id)})
    assert venv.envs[0].unwrapped.render_mode == "rgb_array"
    assert _run_sb3(venv, steps(env_id, 150, episodes=1)) >= 2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_subproc_vec_env(env_id):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    def run():
        venv = make_vec_env(env_id, n_envs=2, seed=0, vec_env_cls=SubprocVecEnv,
                            vec_env_kwargs={"start_method": "fork"}, env_kwargs={"scenario": uniform_mix(env_id)})
        return _run_sb3(venv, steps(env_id, 150, episodes=1))

    assert _bounded(run) >= 2


@pytest.mark.slow
def test_sb3_subproc_vec_env_default_start_method_with_the_module_spelling():
    """SubprocVecEnv's default start method (forkserver, else spawn) starts fresh
    processes that have not imported kenv (unless the main script does): the id
    then names the module to import first, Gymnasium's "module:id" spelling
    (docs/clients.md)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    def run():
        venv = make_vec_env("kenv:kenv/Raid6Bench-v3", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
        return _run_sb3(venv, 100)

    assert _bounded(run, seconds=4 * TIMEOUT_S) >= 2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_standard_wrappers(env_id):
    """RecordEpisodeStatistics, NormalizeObservation, FlattenObservation and a
    TimeLimit shorter than the env's: episode statistics match the steps seen."""
    from gymnasium.wrappers import (
        FlattenObservation, NormalizeObservation, RecordEpisodeStatistics, TimeLimit,
    )

    env = gym.make(env_id, scenario=uniform_mix(env_id))
    env = RecordEpisodeStatistics(TimeLimit(FlattenObservation(NormalizeObservation(env)), max_episode_steps=10))
    env.action_space.seed(1)
    env.reset(seed=1)
    ret, length, episodes = 0.0, 0, 0
    n = steps(env_id, 300)
    for _ in range(n):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert obs.shape == env.observation_space.shape and np.isfinite(obs).all()
        ret += r
        length += 1
        assert trunc == (length == 10)
        if term or trunc:
            assert info["episode"]["l"] == length and np.isclose(info["episode"]["r"], ret)
            ret, length = 0.0, 0
            episodes += 1
            env.reset()
    assert episodes >= n // 10
