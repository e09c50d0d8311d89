"""A model file is untrusted input (#43 item 2): every command that takes ``--model``
reads it without unpickling anything, so a crafted zip whose pickled fields would
create a file creates none; ``--trust-model`` restores SB3's full load (and the same zip
then does create the file: the payload is real).  A model kenv's own tools saved loads
as before and acts identically."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zipfile

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import DQN, PPO

import kenv  # noqa: F401  (registers the ids)
from kenv.agents.policy import load_model
from kenv.errors import ConfigError

ENV = "kenv/RandomMix-v2"


class _Touch:
    """Unpickling this creates ``path`` (what a malicious model would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _saved(tmp_path, cls=PPO) -> str:
    env = gym.make(ENV)
    kw = {"n_steps": 16, "batch_size": 16} if cls is PPO else {"learning_starts": 0}
    model = cls("MlpPolicy", env, seed=0, policy_kwargs={"net_arch": [8]}, **kw)
    model.learn(16)
    path = str(tmp_path / f"{cls.__name__}.zip")
    model.save(path)
    return path


def _craft(src: str, dst: str, marker: str, field: str) -> str:
    """``src`` with ``field`` of its ``data`` replaced by a pickle that creates ``marker``."""
    with zipfile.ZipFile(src) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    data = json.loads(entries["data"])
    payload = base64.b64encode(cloudpickle.dumps(_Touch(marker))).decode()
    data[field] = {**(data.get(field) if isinstance(data.get(field), dict) else {}),
                   ":type:": "<class 'object'>", ":serialized:": payload}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    return dst


@pytest.fixture(scope="module")
def ppo_zip(tmp_path_factory):
    return _saved(tmp_path_factory.mktemp("model"))


def _kenv(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "PYTHONWARNINGS": "ignore"})


COMMANDS = {
    "evaluate": lambda m: ["evaluate", "--env", ENV, "--policy", "patched", "--episodes", "1", "--model", m],
    "trace env": lambda m: ["trace", "env", "--env", ENV, "--model", m, "--steps", "2", "--out", "t.json"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("field", ["policy_class", "_last_obs", "lr_schedule", "kenv_extra"])
def test_a_crafted_model_runs_no_code(tmp_path, ppo_zip, command, field):
    marker = tmp_path / "pwned"
    bad = _craft(ppo_zip, str(tmp_path / "bad.zip"), str(marker), field)
    r = _kenv(*COMMANDS[command](bad), cwd=tmp_path)
    assert not marker.exists(), f"{command}: unpickling {field} ran code"
    assert "Traceback" not in r.stderr
    if field == "kenv_extra":   # a field kenv cannot check: refused, naming it and the way out
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "'kenv_extra'" in r.stderr and "--trust-model" in r.stderr
    else:                       # replaced without being read: the model acts as saved
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_trust_model_is_sb3s_full_load(tmp_path, ppo_zip, command):
    """The payload is real: with --trust-model, SB3 unpickles it and the file appears."""
    marker = tmp_path / "pwned"
    bad = _craft(ppo_zip, str(tmp_path / "bad.zip"), str(marker), "kenv_extra")
    _kenv(*COMMANDS[command](bad), "--trust-model", cwd=tmp_path)
    assert marker.exists()


@pytest.mark.parametrize("cls", [PPO, DQN])
def test_a_saved_model_loads_unpickled_and_acts_the_same(tmp_path, cls):
    path = _saved(tmp_path, cls)
    env = gym.make(ENV)
    safe = load_model(path, cls.__name__.lower(), env=env)
    full = cls.load(path, device="cpu")
    for a, b in zip(safe.policy.state_dict().values(), full.policy.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())
    obs, _ = env.reset(seed=3)
    for _ in range(5):
        a, _ = safe.predict(obs, deterministic=True)
        assert a == full.predict(obs, deterministic=True)[0]
        obs, *_ = env.step(a)


def test_an_unknown_policy_kwargs_class_is_refused(tmp_path, ppo_zip):
    with zipfile.ZipFile(ppo_zip) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    data = json.loads(entries["data"])
    data["policy_kwargs"] = {":type:": "<class 'dict'>", ":serialized:": "AAAA", "net_arch": [8],
                             "activation_fn": "<class 'os.system'>"}
    entries["data"] = json.dumps(data).encode()
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    with pytest.raises(ConfigError) as e:
        load_model(str(bad), "ppo", env=gym.make(ENV))
    assert "policy_kwargs.activation_fn" in str(e.value) and "--trust-model" in str(e.value)


def _with_policy_kwargs(src: str, dst: str, **kwargs) -> str:
    """``src`` with these readable policy_kwargs entries (the weights left as saved)."""
    with zipfile.ZipFile(src) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    data = json.loads(entries["data"])
    data["policy_kwargs"] = {**data["policy_kwargs"], **kwargs}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    return dst


@pytest.mark.parametrize("net_arch", [[2000, 2000], {"pi": [8], "vf": [3000, 1500]}, [10**12]])
def test_layer_sizes_the_weights_cannot_hold_are_refused_before_the_policy_is_built(tmp_path, ppo_zip, net_arch):
    """A few-KB zip whose policy_kwargs ask for huge layers: refused from the sizes alone.
    Before, SB3 built and initialised the policy first (net_arch [20000, 20000]: 8 GB and
    minutes of orthogonal init, [10**12]: a failed allocation) and only then found that
    the weights do not fit."""
    import stable_baselines3.common.policies as sb3_policies

    bad = _with_policy_kwargs(ppo_zip, str(tmp_path / "big.zip"), net_arch=net_arch)
    built = []
    orig = sb3_policies.ActorCriticPolicy._build

    def spy(self, *a, **kw):
        built.append(self.net_arch)
        return orig(self, *a, **kw)

    sb3_policies.ActorCriticPolicy._build = spy
    try:
        with pytest.raises(ConfigError) as e:
            load_model(bad, "ppo", env=gym.make(ENV))
    finally:
        sb3_policies.ActorCriticPolicy._build = orig
    assert "policy_kwargs.net_arch fits its weights" in str(e.value) and built == [], (str(e.value), built)
    r = _kenv(*COMMANDS["evaluate"](bad), cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "net_arch" in r.stderr, r.stderr


@pytest.mark.parametrize("cls,net_arch", [(PPO, [8]), (PPO, [64, 64]), (PPO, {"pi": [16, 8], "vf": [12]}),
                                          (DQN, [32, 16]), (DQN, [])])
def test_the_net_arch_bound_never_refuses_a_real_model(tmp_path, cls, net_arch):
    """The layer-size check is a lower bound: a model saved with these sizes still loads."""
    from kenv.agents.models import MIN_BYTES_PER_WEIGHT, _net_weights

    env = gym.make(ENV)
    kw = {"n_steps": 16, "batch_size": 16} if cls is PPO else {"learning_starts": 0}
    model = cls("MlpPolicy", env, seed=0, policy_kwargs={"net_arch": net_arch}, **kw)
    path = str(tmp_path / "m.zip")
    model.save(path)
    with zipfile.ZipFile(path) as z:
        have = z.getinfo("policy.pth").file_size // MIN_BYTES_PER_WEIGHT
    assert _net_weights(net_arch) <= sum(p.numel() for p in model.policy.parameters()) <= have
    assert load_model(path, cls.__name__.lower(), env=env) is not None


def test_a_crafted_action_names_entry_is_a_short_error(tmp_path, ppo_zip):
    """A zip's kenv_actions.json (read up to 100 KB) is shown cut in the refusal: a name of
    90,000 characters made a one-line error of 90 KB."""
    dst = str(tmp_path / "long.zip")
    with zipfile.ZipFile(ppo_zip) as z, zipfile.ZipFile(dst, "w") as o:
        for n in z.namelist():
            o.writestr(n, z.read(n))
        o.writestr("kenv_actions.json", json.dumps({"actions": ["x" * 90_000, "y"]}))
    with pytest.raises(ConfigError, match=r"it trained on x+ \.\.\.") as e:
        load_model(dst, "ppo", env=gym.make(ENV))
    assert len(str(e.value)) < 2_000 and "\n" not in str(e.value)
