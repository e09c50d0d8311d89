"""Workloads that change within an episode (issue #31 item 1): ``phases=True``.

The reader of /dev/hwrng comes and goes, the job on the benchmarking CPU
starts and stops, qperf's traffic changes size or pauses, by schedules drawn
at reset (kenv.subsystems.phases); these tests check that the schedule is a function
of the seed, that each phase does what its source says (no reader: no
read(2) returns), that the observation entries follow the phase, that bad
values are refused with a clear error, and that the fast-forwards stay exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.envs.raid6_bench import Raid6BenchEnv
from kenv.envs.random_mix import RandomMixEnv
from kenv.errors import ConfigError
from kenv.envs.observation import HWRNG_STATE, QPERF_STATE, obs_rows
from kenv.subsystems.phases import IDLE, JOB, LOAD_SCHEDULES, OFF, READER, READER_SCHEDULES, PhaseSchedule
from kenv.sim.engine import NSEC_PER_MSEC

RPI = {"platform": "rpi3bplus", "preempt": "platform"}
WAITS = ["cpu_relax", "hwrng_yield", "hwrng_msleep(20)", "usleep_range(100,200)"]


def _row(env, name: str) -> int:
    return [r[0] for r in env.obs_rows].index(name)


def _run(env, seed: int, steps: int, actions=None, options=None):
    obs, info = env.reset(seed=seed, options=options)
    out = [(obs, 0.0, info)]
    for i in range(steps):
        a = actions[i] if actions is not None else env.action_space.sample()
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, info))
        if term:
            break
    return out


@given(seed=st.integers(0, 2**32), name=st.sampled_from(sorted(READER_SCHEDULES)))
@settings(max_examples=40, deadline=None)
def test_schedule_is_a_function_of_its_generator_and_not_of_lookahead(seed, name):
    a = PhaseSchedule(name, np.random.default_rng(seed))
    b = PhaseSchedule(name, np.random.default_rng(seed))
    far = b.phase(200)        # looking far ahead first draws the same segments
    got = [a.phase(i) for i in range(201)]
    assert got == [b.phase(i) for i in range(201)] and got[200] == far
    assert set(got) <= {READER, IDLE}
    if name == "none":
        assert set(got) == {READER}
    if name == "idle":
        assert set(got) == {IDLE}
    if name == "boot":      # one burst, then asleep for good
        first_idle = got.index(IDLE)
        assert 8 <= first_idle <= 24 and set(got[first_idle:]) == {IDLE}
    if name == "rngd":      # bursts of 2..16 reads, gaps of 1..4 steps
        runs, i = [], 0
        while i < len(got):
            j = i
            while j < len(got) and got[j] == got[i]:
                j += 1
            runs.append((got[i], j - i))
            i = j
        assert runs[0][0] == READER
        for phase, n in runs[:-1]:
            assert (2 <= n <= 16) if phase == READER else (1 <= n <= 4)


def test_episode_phases_depend_on_the_seed_only():
    env = HwrngWaitEnv(phases=True, scenario={**RPI, "reader_phases": "rngd"})
    env.action_space.seed(0)
    a = [i["reader_phase"] for _, _, i in _run(env, 11, 40, actions=[2] * 40)]
    b = [i["reader_phase"] for _, _, i in _run(env, 11, 40, actions=[2] * 40)]
    c = [i["reader_phase"] for _, _, i in _run(env, 12, 40, actions=[2] * 40)]
    assert a == b and a != c and {READER, IDLE} <= set(a)


def test_idle_phase_has_no_reader():
    # "idle": a board with no rngd -- the reader never reads, the hwrng kthread still does
    env = HwrngWaitEnv(phases=True, scenario={**RPI, "reader_phases": "idle"})
    out = _run(env, 3, 6, actions=[2] * 6)
    assert all(i["hwrng_bytes"] == 0 and i["reader_bytes"] == 0 for _, _, i in out)
    assert all(i["step_sim_s"] == pytest.approx(5.0) for _, _, i in out[1:])   # 5 s steps: no read ends them
    assert out[-1][2]["bits_credited_total"] > 0                               # hwrng_fillfn credited the pool
    # "none": v0's reader, one read(2) per step
    env = HwrngWaitEnv(phases=True, scenario={**RPI, "reader_phases": "none"})
    out = _run(env, 3, 6, actions=[2] * 6)
    assert all(i["hwrng_bytes"] == 16 for _, _, i in out[1:])


def test_observation_follows_the_phase():
    env = HwrngWaitEnv(phases=True, scenario={**RPI, "reader_phases": "rngd"})
    out = _run(env, 5, 47, actions=[1 if i % 3 else 2 for i in range(47)])
    in_read, fifo, since = (_row(env, HWRNG_STATE.names[i]) for i in (1, 0, 3))
    phases = [i["reader_phase"] for _, _, i in out]
    assert {READER, IDLE} <= set(phases[1:])
    for k in range(1, len(out) - 1):
        obs, _, info = out[k]
        # a step that ran idle: nothing read, and the FIFO has filled meanwhile
        if phases[k] == IDLE:
            assert info["hwrng_bytes"] == 0
            assert obs[fifo] == 1.0 and obs[since] > 0.5
        else:
            assert info["hwrng_bytes"] == 16
        # at the end of a reader step the reader is already in its next read(2)
        # iff the next step has a reader; an idle reader wakes as the next step begins
        assert obs[in_read] == float(phases[k] == READER and phases[k + 1] == READER), k


@pytest.mark.parametrize("cls, scenario, field, key, added", [
    (HwrngWaitEnv, RPI, "reader_phases", "hwrng_bytes", 7),
    (RandomMixEnv, {"msg_size": "64K", "preempt": "full"}, "traffic_phases", "round_trips", 2),
    (Raid6BenchEnv, {"load": "20/50", "preempt": "full"}, "load_phases", "worst_wakeup_us", 1)])
def test_phases_none_is_v0s_workload(cls, scenario, field, key, added):
    # the phase schedule draws from its own generator: pinned to "none", the
    # episode is v0's, with the new entries added to the observation
    v0 = cls(scenario=scenario)
    v1 = cls(phases=True, scenario={**scenario, field: "none"})
    acts = [i % len(v0.actions) for i in (0, 1, 2, 2, 0, 1, 2, 0)]
    a, b = _run(v0, 9, 8, actions=acts), _run(v1, 9, 8, actions=acts)
    n = len(obs_rows(cls.VERSIONS[0].observation))
    for (oa, ra, ia), (ob, rb, ib) in zip(a, b):
        assert ra == rb and np.array_equal(oa[:n], ob[:n]) and np.array_equal(oa[n:], ob[-len(v0.actions):])
        assert ia[key] == ib[key]
    assert v1.observation_space.shape[0] == v0.observation_space.shape[0] + added


def test_v0_spaces_are_unchanged():
    assert HwrngWaitEnv().observation_space.shape == (16,)
    assert KernelEnv().observation_space.shape == (24,)
    assert "reader_phases" not in HwrngWaitEnv().version.scenario_fields
    assert "reader_phase" not in HwrngWaitEnv().reset(seed=0)[1]


@pytest.mark.parametrize("make, match", [
    (lambda: HwrngWaitEnv(phases=True, scenario={"reader_phases": "bogus"}), ["phases", "bogus", "rngd"]),
    (lambda: HwrngWaitEnv(phases=True, scenario={"reader_phases": {"rngd": 1, "often": 2}}), ["phases", "often", "idle"]),
    (lambda: HwrngWaitEnv(phases=True).reset(options={"scenario": {"reader_phases": 3}}), ["phases", "3", "none"]),
    (lambda: HwrngWaitEnv(scenario={"reader_phases": "rngd"}), ["phases", "fields"]),
    (lambda: HwrngWaitEnv(phases="yes"), ["phases", "yes", "True"]),
    (lambda: KernelEnv(phases=True), ["phases", "boot_states=True"]),
    (lambda: Raid6BenchEnv(phases=True, scenario={"load_phases": "sometimes"}), ["load_phases", "sometimes", "onoff"]),
    (lambda: KernelEnv(boot_states=True, phases=True, scenario={"load_phases": "rngd"}), ["load_phases", "rngd"]),
    (lambda: RandomMixEnv(phases=True, scenario={"traffic_phases": "bursty"}), ["traffic_phases", "bursty", "sweep"]),
])
def test_bad_phase_values_are_config_errors(make, match):
    with pytest.raises(ConfigError) as e:
        make()
    for m in match:
        assert m in str(e.value)


@pytest.mark.parametrize("make", [lambda: HwrngWaitEnv(phases=True), lambda: Raid6BenchEnv(phases=True),
                                  lambda: RandomMixEnv(phases=True),
                                  lambda: KernelEnv(boot_states=True, phases=True)])
def test_check_env_with_phases(make):
    check_env(make(), skip_render_check=True)


@pytest.mark.parametrize("name", ["rngd", "boot"])
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_forward_is_exact_with_phases_hwrng(name, seed):
    rnd = np.random.default_rng(seed)
    acts = list(rnd.integers(0, len(WAITS), 40))
    for plat in ("rpi3bplus", "bcm2835-kernelci"):
        scen = {"platform": plat, "reader_phases": name}
        a = _run(HwrngWaitEnv(phases=True, actions=WAITS, scenario=scen), seed, 40, actions=acts)
        b = _run(HwrngWaitEnv(phases=True, actions=WAITS, scenario=scen, fast_forward=False), seed, 40, actions=acts)
        assert [(o.tobytes(), r, repr(i)) for o, r, i in a] == [(o.tobytes(), r, repr(i)) for o, r, i in b]


@pytest.mark.parametrize("seed", [1, 2])
def test_fast_forward_is_exact_with_phases_kernel(seed):
    rnd = np.random.default_rng(seed)
    acts = [np.array([rnd.integers(0, 2), rnd.integers(0, len(WAITS)), rnd.integers(0, 2)]) for _ in range(20)]
    kw = dict(boot_states=True, phases=True, actions={"wait": WAITS},
              scenario={"reader_phases": "rngd", "start": "ready", "step_ms": 5, "load": "20/50",
                        "load_phases": "onoff", "traffic_phases": "pauses"})
    a = _run(KernelEnv(**kw), seed, 20, actions=acts)
    b = _run(KernelEnv(**kw, fast_forward=False), seed, 20, actions=acts)
    assert [(o.tobytes(), r, repr(i)) for o, r, i in a] == [(o.tobytes(), r, repr(i)) for o, r, i in b]
    assert {READER, IDLE} <= {i["reader_phase"] for _, _, i in a}
    assert {JOB, OFF} <= {i["load_phase"] for _, _, i in a}
    assert "pause" in {i["traffic_phase"] for _, _, i in a}


def _raid6_episode(schedule: str, seed: int):
    env = Raid6BenchEnv(phases=True, scenario={"load": "20/50", "load_phases": schedule, "preempt": "full"})
    env.reset(seed=seed)
    rq = _row(env, "runqueue length of the modprobe CPU / 4")
    out = []
    while True:
        obs, _, term, _, info = env.step(1)
        job = env.unwrapped._episode.r6._job
        out.append((info["load_phase"], job.sum_exec_runtime, float(obs[rq])))
        if term:
            return out[:-1]     # (the last step: modprobe has exited)


@given(seed=st.integers(0, 10**6), name=st.sampled_from(sorted(LOAD_SCHEDULES)))
@settings(max_examples=20, deadline=None)
def test_load_schedules_draw_their_documented_lengths(seed, name):
    got = [PhaseSchedule(name, np.random.default_rng(seed), LOAD_SCHEDULES).phase(i) for i in range(64)]
    if name == "none":
        assert set(got) == {JOB}
    elif name == "starts":
        assert got[0] == OFF and 1 <= got.index(JOB) <= 8 and set(got[got.index(JOB):]) == {JOB}
    elif name == "stops":
        assert got[0] == JOB and 1 <= got.index(OFF) <= 8 and set(got[got.index(OFF):]) == {OFF}
    else:
        assert got[0] == JOB and {JOB, OFF} == set(got)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_job_that_has_not_started_runs_nothing_and_a_stopped_one_finishes_its_period(seed):
    out = _raid6_episode("starts", seed)
    first = [p for p, _, _ in out].index(JOB)
    assert first >= 1 and all(t == 0 for _, t, _ in out[:first]) and out[-1][1] > 0
    out = _raid6_episode("stops", seed)
    stop = [p for p, _, _ in out].index(OFF)
    ran = [t for _, t, _ in out[stop - 1:]]
    assert ran[-1] - ran[0] <= 20 * NSEC_PER_MSEC      # at most the rest of its 20 ms period
    assert len(set(ran[1:])) == 1                     # then nothing


def test_runqueue_entry_sees_the_job():
    job_rows, off_rows = [], []
    for seed in range(3):
        for phase, _, row in _raid6_episode("onoff", seed):
            (job_rows if phase == JOB else off_rows).append(row)
    assert max(job_rows) > max(off_rows) == 0.25      # modprobe alone when the job is off


# ------------------------------------------------------------ RandomMix traffic

def _traffic(schedule: str, size: str, seed: int, steps: int = 32, ff: bool = True, preempt: str = "platform"):
    env = RandomMixEnv(phases=True, fast_forward=ff, actions=["workqueue", "timer", "schedule_work", "hardirq"],
                       scenario={"traffic_phases": schedule, "msg_size": size, "preempt": preempt})
    return env, _run(env, seed, steps, actions=[(i * 7 + seed) % 4 for i in range(steps)])


@pytest.mark.parametrize("size", ["4K", "256K"])
def test_a_pause_has_no_traffic_and_the_interrupt_rate_shows_it(size):
    env, out = _traffic("pauses", size, 4)
    irq = _row(env, QPERF_STATE.names[0])
    phases = [i["traffic_phase"] for _, _, i in out]
    assert "pause" in phases[1:]
    for k in range(2, len(out)):
        obs, r, info = out[k]
        if phases[k] == "pause":
            # the round trip in flight as the pause began completes; then nothing
            assert info["round_trips"] <= (1 if phases[k - 1] != "pause" else 0)
            assert info["latency_us"] == -1.0 and info["reward_components"]["throughput"] == 0.0
            if phases[k - 1] == "pause":
                assert obs[irq] == 0.0 and info["mixes"] == 0
        else:
            assert info["round_trips"] > 0 and obs[irq] > 0.3


def test_the_sweep_goes_on_at_twice_the_size():
    env, out = _traffic("sweep", "16K", 2)
    phases = [i["traffic_phase"] for _, _, i in out[1:]]
    k = phases.index("pause")
    assert 1 <= k <= 31 and set(phases[:k]) == {"16 KiB"} and set(phases[k + 1:]) <= {"32 KiB"}
    clean = {i["traffic_phase"]: i["clean_latency_us"] for _, _, i in out[1:]}
    assert clean["32 KiB"] > clean["16 KiB"]
    # after 1024K the sweep is over: no traffic at all
    _, out = _traffic("sweep", "1024K", 2)
    phases = [i["traffic_phase"] for _, _, i in out[1:]]
    k = phases.index("pause")
    assert set(phases[k:]) == {"pause"} and all(i["round_trips"] == 0 for _, _, i in out[k + 3:])


@pytest.mark.parametrize("schedule, size, seed, preempt", [
    ("pauses", "4K", 4, "platform"), ("pauses", "64K", 5, "full"), ("pauses", "1024K", 4, "rt"),
    ("sweep", "4K", 5, "full"), ("sweep", "64K", 4, "platform"), ("sweep", "512K", 7, "platform")])
def test_fast_forward_is_exact_with_phases_randommix(schedule, size, seed, preempt):
    _, a = _traffic(schedule, size, seed, preempt=preempt)
    _, b = _traffic(schedule, size, seed, ff=False, preempt=preempt)
    assert [(o.tobytes(), r, repr(i)) for o, r, i in a] == [(o.tobytes(), r, repr(i)) for o, r, i in b]



def test_qperf_cannot_start_paused():
    from kenv.platforms import get_platform
    from kenv.workloads.qperf import QperfTcpLat, irq_randomness_factory

    plat = get_platform("x86-ib40g")
    wl = QperfTcpLat(plat, random_factory=irq_randomness_factory(plat), preempt="voluntary",
                     rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="msg_size"):
        wl.run_slice(0, wl.engine.now + 10**6)


@pytest.mark.parametrize("make, added", [
    (lambda **kw: HwrngWaitEnv(**kw), {"reader_phase"}),
    (lambda **kw: RandomMixEnv(**kw), {"traffic_phase"}),
    (lambda **kw: Raid6BenchEnv(**kw), {"load_phase"}),
    (lambda **kw: KernelEnv(boot_states=True, **kw), {"traffic_phase", "reader_phase", "load_phase"})])
def test_phased_info_is_v0s_plus_the_phases_with_one_type_each(make, added):
    env, v0 = make(phases=True), make()
    _, info = env.reset(seed=1)
    assert set(info) == set(v0.reset(seed=1)[1]) | added
    types = {k: type(v) for k, v in info.items()}
    env.action_space.seed(1)
    for i in range(40):
        _, _, term, trunc, info = env.step(env.action_space.sample())
        assert {k: type(v) for k, v in info.items()} == types, i
        assert all(isinstance(info[k], str) and info[k] for k in added)
        if term or trunc:
            _, info = env.reset(seed=i)


@pytest.mark.parametrize("cls,kwargs,fields", [
    (HwrngWaitEnv, {}, ("reader_phases",)),
    (RandomMixEnv, {}, ("traffic_phases",)),
    (Raid6BenchEnv, {}, ("load_phases",)),
    (KernelEnv, {"boot_states": True}, ("reader_phases", "load_phases", "traffic_phases")),
])
def test_phase_schedules_are_drawn_within_a_context_not_enumerated(cls, kwargs, fields):
    """The oracle's contexts leave the phase fields out (the same contexts as the
    unphased env), and an episode forced into a context draws its schedules from
    the mix: several schedules show up across seeds (ScenarioMix.within_episode)."""
    phased, plain = cls(phases=True, **kwargs), cls(**kwargs)
    assert len(phased.mix.contexts()) == len(plain.mix.contexts())
    assert not set(fields) & set(phased.mix.context_fields())
    ctx = phased.mix.contexts()[0]
    assert not set(fields) & set(ctx)
    seen = {tuple(phased.reset(seed=s, options={"scenario": ctx})[1]["scenario"][f] for f in fields)
            for s in range(12)}
    assert len(seen) > 1, seen
