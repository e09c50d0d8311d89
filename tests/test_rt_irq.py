"""PREEMPT_RT's forced interrupt threads and timer-softirq threads (kenv.kernel.irq),
from the kernel's rules: kernel/irq/manage.c (irq_thread(), sched_set_fifo() at
MAX_RT_PRIO / 2), kernel/softirq.c (NET_RX at the thread's local_bh_enable(),
TIMER_SOFTIRQ in ktimers/N or ksoftirqd/N)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.errors import ConfigError
from kenv.kernel.core import BLOCK, SCHED_FIFO, SCHED_NORMAL, Kernel, Run, SchedCosts
from kenv.kernel.irq import IRQ_THREAD_PRIO, KTIMERS_PRIO, MAX_RT_PRIO, timer_softirq_thread
from kenv.kernel.timer import timer_list
from kenv.platforms import get_platform
from kenv.sim.engine import Engine
from kenv.workloads.qperf import QperfTcpLat, irq_randomness_factory

COSTS = SchedCosts(wakeup_ns=2_000, context_switch_ns=1_500)


def _kernel(preempt: str, irq_threads: bool = True, kernel_version: str | None = "6.1") -> Kernel:
    return Kernel(Engine(), nr_cpus=2, hz=1000, preempt=preempt, costs=COSTS,
                  kernel_version=kernel_version, irq_threads=irq_threads)


def _hog(k: Kernel, cpu: int = 0):
    """A CFS task that runs without end on ``cpu``."""
    def body(task):
        while True:
            yield Run(1_000_000)
    return k.kthread_run(body, "hog", cpu=cpu)


def test_irq_thread_priority_is_max_rt_prio_half():
    assert MAX_RT_PRIO == 100 and IRQ_THREAD_PRIO == 50 and KTIMERS_PRIO == 1


def test_nic_interrupt_wakes_irq_thread_that_preempts_cfs_task():
    k = _kernel("rt")
    hog = _hog(k)
    k.run(until=100_000)
    assert k.cpus[0].curr is hog
    seen = {}

    def net_rx():
        seen["task"] = k.cpus[0].curr
        seen["t"] = k.now

    t_irq = k.now
    k.hardirq(0, 1_000, k.irq.irq_wake_thread, 0, "mlx4-ib0", 5_000, net_rx, name="mlx4-ib0")
    k.run(until=200_000)
    th = seen["task"]
    assert th.comm.startswith("irq/") and th.comm.endswith("-mlx4-ib0")
    assert th.policy == SCHED_FIFO and th.rt_priority == 50
    assert hog.nivcsw >= 1                      # preempted by the thread
    # after the hard part (1 us), a context switch, then NET_RX's 5 us in the thread
    assert seen["t"] == t_irq + 1_000 + COSTS.context_switch_ns + 5_000
    assert th.state == "S" and k.cpus[0].curr is hog   # it slept again; the hog is back


def test_no_irq_threads_is_refused_off_rt(capsys):
    """--no-irq-threads changes only rt: on another model it is a one-line error."""
    from kenv.cli import main

    for preempt in (["--preempt", "full"], []):
        with pytest.raises(SystemExit) as e:
            main(["experiment", "qperf-tcp-lat", "--platform", "x86-ib40g", "--deferral", "timer",
                  "--time", "0.01", "--no-irq-threads", *preempt])
        err = capsys.readouterr().err
        assert e.value.code == 2 and "--no-irq-threads" in err and "--preempt rt" in err


def test_kernel_options_are_refused_by_envs_without_them():
    with pytest.raises(ConfigError, match="no version of kenv/HwrngWait simulates"):
        gym.make("kenv/HwrngWait-v2", irq_threads=True)
    with pytest.raises(ConfigError, match="False for kenv/HwrngWaitPhased-v0"):
        gym.make("kenv/HwrngWaitPhased-v0", irq_threads=True)


def test_full_has_no_irq_threads_and_steals():
    k = _kernel("full")
    assert k.irq is None
    hog = _hog(k)
    k.run(until=100_000)
    k.run_softirq(0, "NET_RX", 5_000, None)
    k.run(until=200_000)
    assert hog.nivcsw == 0 and not any(t.comm.startswith("irq/") for t in k.tasks)


def test_irq_threads_off_on_rt_steals_as_before():
    k = _kernel("rt", irq_threads=False)
    assert k.irq is None


@pytest.mark.parametrize("version, comm, policy, prio", [
    ("6.1", "ktimers/1", SCHED_FIFO, 1), ("5.15", "ksoftirqd/1", SCHED_NORMAL, 0)])
def test_timer_function_runs_in_its_softirq_thread(version, comm, policy, prio):
    k = _kernel("rt", kernel_version=version)
    ran = {}

    def fn(timer):
        ran["task"] = k.cpus[1].curr
        ran["t"] = k.now

    tm = timer_list(fn, cost_ns=600, name="mix")
    tm.expires = k.jiffies
    k.timers.add_timer_on(tm, 1)
    k.run(until=3 * k.TICK_NSEC)
    th = ran["task"]
    assert th.comm == comm and th.policy == policy and th.rt_priority == prio
    # the next tick, then an idle CPU's wakeup and a switch, then the callback's 600 ns
    assert ran["t"] == k.TICK_NSEC + COSTS.wakeup_ns + COSTS.context_switch_ns + 600


def test_ktimers_preempts_cfs_ksoftirqd_does_not_at_once():
    for version, preempted in (("6.1", True), ("5.15", False)):
        k = _kernel("rt", kernel_version=version)
        hog = _hog(k, cpu=1)
        k.run(until=k.TICK_NSEC // 2)
        tm = timer_list(lambda t: None, cost_ns=600)
        tm.expires = k.jiffies
        k.timers.add_timer_on(tm, 1)
        k.run(until=k.TICK_NSEC + 50_000)
        # ktimers (FIFO 1) preempts the CFS hog at once; ksoftirqd (nice 0) waits for
        # CFS: a hog that has run half a tick is not behind by the wakeup granularity
        assert (hog.nivcsw >= 1) == preempted, version


def test_timer_softirq_thread_by_version():
    assert timer_softirq_thread("5.15") == "ksoftirqd"
    assert timer_softirq_thread("5.16") == "ktimers"
    assert timer_softirq_thread("6.1") == "ktimers"
    assert timer_softirq_thread(None) == "ktimers"


def _qperf(preempt, irq_threads, deferral="timer", mode="aggregated"):
    plat = get_platform("x86-ib40g")
    return QperfTcpLat(plat, random_factory=irq_randomness_factory(plat, deferral=deferral), preempt=preempt,
                       rng=np.random.default_rng(0), mode=mode, irq_threads=irq_threads)


def test_qperf_net_rx_runs_in_the_irq_thread_on_rt():
    wl = _qperf("rt", True)
    st = wl.run_size(4096, 20_000_000)[0]
    k = wl.hosts[0].k
    threads = [t for t in k.tasks if t.comm.startswith("irq/")]
    assert len(threads) == 1 and threads[0].rt_priority == IRQ_THREAD_PRIO
    # one interrupt per 4 KiB message: the thread ran once per message received
    assert k.irq.irq_thread(0, "mlx4-ib0").runs == wl.pairs[0].client.msgs_received
    base = _qperf("full", True).run_size(4096, 20_000_000)[0]
    # each leg pays the thread's wakeup and switches: slower than full, whose
    # kernel has no threads even when asked
    assert st.latency_ns > base.latency_ns
    assert not any(t.comm.startswith("irq/") for t in _qperf("full", True).hosts[0].k.tasks)


def _qperf_state(wl):
    """Every task's counters on both hosts, their runqueues, the clock."""
    return (wl.engine.now,
            tuple(sorted((t.comm, t.state, t.vruntime, t.sum_exec_runtime, t.nvcsw, t.nivcsw)
                         for h in wl.hosts for t in h.k.tasks)),
            tuple((h.k.cpus[0].nr_switches, h.k.cpus[0].busy_ns, h.k.cpus[0].min_vruntime) for h in wl.hosts),
            tuple((ep.irq_thread.runs, ep.msgs_received) for ep in (wl.pairs[0].client, wl.pairs[0].server)),
            tuple(h.random.fast_pool(0).irqs for h in wl.hosts), tuple(h.random.mixes for h in wl.hosts))


@pytest.mark.parametrize("deferral, size", [("workqueue", 16384), ("timer", 65536), ("schedule_work", 4096),
                                            ("none", 262144)])
def test_qperf_rt_threads_fast_forward_matches_exact(deferral, size):
    """On rt with threads the fast-forward skips steady round trips (with what
    irq/N did in them) and leaves every counter as the detailed run does
    (timer 64K: ksoftirqd/0, a CFS task, moves the server's min_vruntime)."""
    fast, exact = _qperf("rt", True, deferral=deferral), _qperf("rt", True, deferral=deferral, mode="exact")
    a = fast.run_size(size, 300_000_000)[0]
    b = exact.run_size(size, 300_000_000)[0]
    assert a.jumps > 0 and b.jumps == 0
    assert a.detailed_round_trips < b.detailed_round_trips / 10
    assert (a.latency_ns, a.round_trips, a.mixes_client) == (b.latency_ns, b.round_trips, b.mixes_client)
    assert _qperf_state(fast) == _qperf_state(exact)


def test_napi_batch_grows_with_the_thread_switches():
    nic = get_platform("x86-ib40g").nic
    assert nic.napi_batch() == nic.napi_batch(nic.irq_ns)
    assert nic.napi_batch(nic.irq_ns + 2 * 1_500) > nic.napi_batch()


def test_env_kwarg_only_for_envs_that_offer_it():
    import gymnasium as gym

    import kenv  # noqa: F401
    from kenv.errors import ConfigError
    env = gym.make("kenv/RandomMix-v2", irq_threads=True, scenario={"preempt": "rt"})
    env.reset(seed=1)
    env.step(0)
    with pytest.raises(ConfigError, match="irq_threads"):
        gym.make("kenv/Raid6Bench-v3", irq_threads=True)


def test_del_timer_drops_a_callback_waiting_in_the_thread():
    """schedule_timeout()'s del_singleshot_timer_sync() waits for a running callback
    on PREEMPT_RT; a process_timeout() run after the task went on would wake it
    out of its next sleep.  A deleted timer's callback does not run later."""
    k = _kernel("rt", kernel_version="5.15")
    hog = _hog(k, cpu=1)     # keeps ksoftirqd/1 (CFS) waiting after the tick
    calls = []
    tm = timer_list(lambda t: calls.append(k.now), name="process_timeout")
    tm.expires = k.jiffies
    k.timers.add_timer_on(tm, 1)
    k.run(until=k.TICK_NSEC + 1)        # expired: its callback waits for ksoftirqd/1
    assert not calls and tm._expiring and hog.state == "R"
    assert k.timers.del_timer(tm) is False   # not pending any more
    k.run(until=20 * k.TICK_NSEC)
    assert calls == []
    # mod_timer() re-arms without dropping a waiting callback
    tm2 = timer_list(lambda t: calls.append(k.now), name="t2")
    tm2.expires = k.jiffies
    k.timers.add_timer_on(tm2, 1)
    k.run(until=k.next_tick(k.now) + 1)
    k.timers.mod_timer(tm2, k.jiffies + 5, 1)
    k.run(until=k.now + 40 * k.TICK_NSEC)
    assert len(calls) == 2


def test_kernel_env_takes_irq_threads():
    import gymnasium as gym

    import kenv  # noqa: F401
    env = gym.make("kenv/Kernel-v3", irq_threads=True, scenario={"preempt": "rt", "step_ms": 5})
    env.reset(seed=3)
    for _ in range(3):
        env.step(env.action_space.sample())
    ep = env.unwrapped._episode
    comms = {t.comm.split("/")[0] for t in ep.k.tasks}
    assert {"irq", "ksoftirqd"} <= comms


@pytest.mark.parametrize("msg_size", ["4K", "64K"])
def test_randommix_rt_threads_same_with_and_without_fast_forward(msg_size):
    import gymnasium as gym

    import kenv  # noqa: F401

    def run(ff):
        env = gym.make("kenv/RandomMix-v2", irq_threads=True, fast_forward=ff,
                       scenario={"preempt": "rt", "msg_size": msg_size, "step_ms": 10})
        out = [env.reset(seed=5)[0].tolist()]
        for i in range(12):
            obs, r, te, tr, info = env.step((i // 3) % 2)
            info = {k: np.asarray(v).tolist() for k, v in info.items() if k != "step_sim_s"}
            out.append((obs.tolist(), r, te, tr, sorted(info.items())))
        return out, env.unwrapped._episode.q.wl.pairs[0].jumps

    fast, jumps = run(True)
    exact, none = run(False)
    assert jumps > 0 and none == 0
    assert fast == exact


def test_kernel_env_rt_threads_same_with_and_without_fast_forward():
    import gymnasium as gym

    import kenv  # noqa: F401

    def run(ff):
        env = gym.make("kenv/Kernel-v3", irq_threads=True, fast_forward=ff,
                       scenario={"preempt": "rt", "msg_size": "16K", "step_ms": 10})
        env.action_space.seed(2)
        out = [env.reset(seed=2)[0].tolist()]
        for _ in range(10):
            obs, r, te, tr, info = env.step(env.action_space.sample())
            info = {k: np.asarray(v).tolist() for k, v in info.items() if k != "step_sim_s"}
            out.append((obs.tolist(), r, te, tr, sorted(info.items())))
            if te or tr:
                break
        return out, env.unwrapped._episode.q.wl.pairs[0].jumps

    fast, jumps = run(True)
    exact, none = run(False)
    assert jumps > 0 and none == 0
    assert fast == exact


@pytest.mark.parametrize("preempt, irq_threads, has_ff", [
    ("full", True, True), ("rt", False, True), ("rt", True, False)])
def test_hwrng_fast_forward_is_off_where_timers_expire_in_a_thread(preempt, irq_threads, has_ff):
    """The hwrng fast-forward's records hold no ksoftirqd/ktimers run, so it
    is off on rt with interrupt threads, whoever builds the rng (it used to be
    the Kernel env that left it out)."""
    from kenv.drivers.hwrng import bcm2835_rng_probe
    from kenv.fastforward.hwrng import HwrngLearned
    from kenv.drivers.random import InputPool
    k = _kernel(preempt, irq_threads)
    params = get_platform("rpi3bplus").hwrng
    core = bcm2835_rng_probe(k, params, "hwrng_msleep(1000)", InputPool(k), smp_cache_bytes=64,
                             learned=HwrngLearned())
    assert (core.rng.ff is not None) is has_ff
