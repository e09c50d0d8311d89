"""The env-facing commands: kenv evaluate and kenv bench (their --json keys are read by scripts)."""

from __future__ import annotations

import json

import pytest

from kenv.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_json_keys_and_all_policies(capsys):
    out = _json(capsys, ["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "all", "--episodes", "3", "--json"])
    assert {"env", "profile", "episodes", "policies"} <= set(out)
    names = {p["name"] for p in out["policies"]}
    assert names == {"original", "pre_patch", "patched", "random", "oracle"}
    for p in out["policies"]:
        assert {"name", "return_mean", "return_ci95", "components"} <= set(p)
        assert set(p["components"]) == {"entropy", "throughput", "latency", "rcu_stall", "bug", "spin"}


def test_json_is_json_when_a_figure_is_nan(capsys):
    """One episode has no 95% interval: --json printed ``"return_ci95": NaN``, which
    is not JSON (jq, JSON.parse refuse it).  It is null; the keys are unchanged."""
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "1",
                 "--json"]) == 0
    text = capsys.readouterr().out

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    [p] = json.loads(text, parse_constant=refuse)["policies"]
    assert p["return_ci95"] is None and isinstance(p["return_mean"], float)


@pytest.mark.parametrize("argv,needle", [
    (["evaluate", "--env", "kenv/Nope-v0"], "env"),
    (["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "genius"], "policy"),
    (["evaluate", "--env", "kenv/Raid6Bench-v3", "--profile", "speed"], "reward"),
    (["evaluate", "--env", "kenv/Raid6Bench-v3", "--episodes", "0"], "episodes"),
    (["bench", "--steps", "0"], "steps"),
    (["bench", "--steps", "5", "--warmup", "-1"], "warmup"),
])
def test_bad_input_exits_2_with_the_field_named(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "allowed" in err


def test_bench_json_keys(capsys):
    out = _json(capsys, ["bench", "--steps", "50", "--env", "kenv/Raid6Bench-v3", "--json"])
    assert out["cartpole_steps_per_s"] > 0
    assert out["warmup_steps"] == 1000               # the default
    (e,) = out["envs"]
    assert set(e) == {"id", "steps_per_s", "ratio_to_cartpole", "rate_ratio_to_cartpole", "sim_s_per_step"}
    assert e["id"] == "kenv/Raid6Bench-v3" and e["sim_s_per_step"] > 0


def _fake_chunks(monkeypatch, rates):
    """run_bench's chunks replaced: each returns the next of ``rates`` (steps/s;
    0.001 simulated s per step for a kenv env); the (env id, steps) asked, in order."""
    from kenv.envs import bench

    calls = []
    rates = iter(rates)

    def chunk(self, steps):
        calls.append((self.env.spec.id, steps))
        return next(rates), 0.001 if self.env.spec.id != "CartPole-v1" else 0.0

    monkeypatch.setattr(bench._Stepper, "chunk", chunk)
    monkeypatch.setattr(bench, "steps_per_second", lambda *a, **k: (1.0, 0.0))
    return calls


def test_bench_alternates_chunks_and_takes_medians(monkeypatch):
    """run_bench measures CartPole and the env in alternating chunks that add up to
    the steps asked for (5x for CartPole) and reports the median chunk ratio."""
    from kenv.envs import bench
    from kenv.errors import ConfigError

    calls = _fake_chunks(monkeypatch, [100.0, 10.0, 100.0, 30.0, 50.0, 10.0])  # CartPole, env, ...
    out = bench.run_bench(steps=7, env_ids=["kenv/Raid6Bench-v3"], rounds=3, warmup=0)
    assert calls == [("CartPole-v1", 15), ("kenv/Raid6Bench-v3", 3), ("CartPole-v1", 10),
                     ("kenv/Raid6Bench-v3", 2), ("CartPole-v1", 10), ("kenv/Raid6Bench-v3", 2)]
    (e,) = out.envs
    assert e["ratio_to_cartpole"] == 0.2            # median of 0.1, 0.3, 0.2
    assert e["steps_per_s"] == 10.0 and out.cartpole_steps_per_s == 100.0
    assert abs(e["sim_s_per_step"] - 0.001) < 1e-12
    with pytest.raises(ConfigError, match="rounds"):
        bench.run_bench(steps=7, env_ids=["kenv/Raid6Bench-v3"], rounds=0)
    with pytest.raises(ConfigError, match="steps"):
        bench.run_bench(steps=0, env_ids=["kenv/Raid6Bench-v3"])
    with pytest.raises(ConfigError, match="warmup"):
        bench.run_bench(steps=7, env_ids=["kenv/Raid6Bench-v3"], warmup=-1)
    assert len(calls) == 6                          # no bad call measured anything


def test_bench_warms_each_env_up_untimed(monkeypatch):
    """Each env (and the CartPole beside it) first takes ``warmup`` steps whose
    rates are not used; the timed chunks follow, and the ratio is theirs."""
    from kenv.envs import bench

    # the warm-ups' rates would give 1e-6
    calls = _fake_chunks(monkeypatch, [1e6, 1.0, 100.0, 10.0, 100.0, 30.0])
    out = bench.run_bench(steps=4, env_ids=["kenv/Raid6Bench-v3"], rounds=2, warmup=50)
    assert calls == [("CartPole-v1", 50), ("kenv/Raid6Bench-v3", 50), ("CartPole-v1", 10),
                     ("kenv/Raid6Bench-v3", 2), ("CartPole-v1", 10), ("kenv/Raid6Bench-v3", 2)]
    (e,) = out.envs
    assert e["ratio_to_cartpole"] == 0.2            # median of 0.1 and 0.3: not the warm-up's 1e-6
    assert out.to_dict()["warmup_steps"] == 50


def test_every_env_id_check_is_the_one_in_registration(monkeypatch, capsys):
    """kenv.envs.registration.check_env_id is the single source: with its id list cut
    short, argparse's --env, kenv bench, the agents' configs and commands all refuse the
    removed id, with the same message (field, value, the ids)."""
    import gymnasium as gym

    from kenv.agents import discover, rediscover
    from kenv.agents.config import load_train_config
    from kenv.envs import registration
    from kenv.envs.bench import run_bench
    from kenv.errors import ConfigError

    assert set(registration.ENV_IDS) | set(registration.RENAMED) == {i for i in gym.registry if i.startswith("kenv/")}
    monkeypatch.setattr(registration, "ENV_IDS", ("kenv/HwrngWait-v2",))
    gone = "kenv/Raid6Bench-v3"
    calls = {"env": lambda: run_bench(5, [gone], warmup=0, rounds=1),
             "env ": lambda: load_train_config("ppo", gone),
             "--env": lambda: discover.check_args(gone, "balanced", "extended", None, 2),
             "--envs": lambda: rediscover.rediscover([gone])}
    for field, call in calls.items():
        with pytest.raises(ConfigError) as e:
            call()
        assert (e.value.field, e.value.value, e.value.allowed) == (field.strip(), gone, "kenv/HwrngWait-v2")
    with pytest.raises(SystemExit):
        main(["evaluate", "--env", gone])
    assert f"argument --env: got '{gone}'; allowed: kenv/HwrngWait-v2" in capsys.readouterr().err
