"""``modprobe raid6_pq`` under a cyclictest probe on a simulated kernel."""

from __future__ import annotations

from types import MappingProxyType

from ..experiments.raid6_cyclictest import SETTLE_NS
from ..kernel.core import BLOCK, SCHED_NORMAL, TASK_RUNNABLE, Kernel, Run, Task, TaskBody
from ..sim.engine import NSEC_PER_SEC
from ..workloads.cyclictest import Cyclictest
from ..workloads.load import HOG_CHUNK_NS, parse_load, start_load
from ..workloads.modprobe import Modprobe
from .common import NO_VALUE, Decision, log_latency
from .phases import JOB, PhaseSchedule

#: how a benchmark window of raid6_choose_gen() is protected: preempt_disable()
#: (upstream), migrate_disable() (the patch), preempt_disable() with a
#: cond_resched() after the window, or no window (CONFIG_RAID6_PQ_BENCHMARK=n)
BENCHMARK_MODE = Decision(default=("preempt_disable", "migrate_disable"),
                          extended=("cond_resched", "no_benchmark"),
                          original="preempt_disable", pre_patch="preempt_disable", patched="migrate_disable")
#: the background load on the benchmarking CPU (kenv.workloads.load)
LOADS = ("none", "continuous", "20/50")

#: windows in the longest benchmark (v5.16, AVX-512: 9 gen + 9 xor), for the progress entry
MAX_WINDOWS = 18
#: ``info["window"]`` of a step in which no benchmark window ended (and of reset)
NO_WINDOW = MappingProxyType({"algo": "", "kind": "", "perf": -1, "mb_s": -1, "lost_fraction": NO_VALUE})
#: the benchmark's result in info until modprobe exits
NO_RESULT = MappingProxyType({"chosen": "", "best": "", "chosen_gen_mb_s": NO_VALUE, "best_gen_mb_s": NO_VALUE,
             "throughput_lost": NO_VALUE, "dmesg": "", "load_s": NO_VALUE})


class _ProbeCyclictest(Cyclictest):
    """cyclictest that also remembers when each thread's hrtimer last fired,
    so a step can count a wakeup that is still waiting for the CPU."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.fired_at: dict[int, int] = {}

    def _hrtimer_expire(self, task):
        self.fired_at[task.pid] = self.k.now
        super()._hrtimer_expire(task)


class Raid6Subsystem:
    """``modprobe raid6_pq`` on a simulated kernel, probed by a cyclictest
    thread on the CPU it runs on.  Used by Raid6Bench and Kernel:
    ``begin_step(mode)``, run the kernel, ``end_step()``.

    With load balancing (the ``-v1`` kernels) modprobe may be pulled to
    another CPU; the probe follows it: cyclictest ``-S`` has a thread on
    every CPU, and the one on each CPU modprobe reaches is started when it
    gets there (its period's phase is that moment; the threads on CPUs
    modprobe never visits would see an idle CPU and are not simulated).  The
    step's worst wakeup is the worst over the probe's threads."""

    def __init__(self, k: Kernel, plat, *, cpu: int, kernel_version: str, load, interval_us: int,
                 t0: int, schedule: PhaseSchedule | None = None):
        self.k, self.plat, self.cpu = k, plat, cpu
        self.load = parse_load(load)
        self.ct = _ProbeCyclictest(k, plat.cyclictest, interval_us=interval_us, priority=95, cpus=[cpu])
        self.ct.start(t0)
        self.mp = Modprobe(k, plat.extra["modprobe"], plat.raid6, kernel_version=kernel_version,
                           mode="preempt_disable")
        k.engine.at(t0 + plat.cyclictest.thread_spawn_ns + SETTLE_NS, self._launch)
        self.steps = 0
        self.last = [0.0, 0.0]
        self.credited = False
        #: info's benchmark result: NO_RESULT until modprobe exits
        self.result = NO_RESULT
        #: called as a benchmark window ends and as modprobe exits (Raid6Bench-v3's step ends)
        self.on_progress = None
        #: the background job's phases (kenv.subsystems.phases; None: the job throughout)
        self.schedule = schedule
        #: the step in progress (0 until the second begin_step)
        self.step_no = 0
        self._stepped = False
        self._job: Task | None = None
        self._job_parked = False

    def _launch(self) -> None:
        # fork+exec from a shell that last ran on ``cpu``, which is idle: it stays there
        task = self.mp.start(self.cpu)
        task.on_migrate.append(self._follow)
        if self.on_progress is not None:
            self.mp.sel.on_window = self.on_progress
            task.on_exit.append(lambda _task: self.on_progress())
        if self.load is not None:
            if self.schedule is None:
                start_load(self.k, task.cpu, self.load)
            else:    # (start_load's task, stopped and started by the schedule)
                self._job = self.k.kthread_run(self._phased_job, "stress", cpu=task.cpu, policy=SCHED_NORMAL)

    def _phased_job(self, task: Task) -> TaskBody:
        """The scenario's load (kenv.workloads.load) that runs only in the
        schedule's ``job`` steps: out of them it sleeps (the service has
        exited) until a ``job`` step begins.  It looks at its phase where it
        would stop: a periodic job as a period begins, the continuous hog
        between its chunks (HOG_CHUNK_NS of CPU).  A started job runs its
        first period at once."""
        spec, k = self.load, task.k
        eng = k.engine
        nxt = eng.now
        while True:
            if self.schedule.phase(self.step_no) != JOB:
                self._job_parked = True
                yield BLOCK                  # woken by begin_step
                self._job_parked = False
                nxt = eng.now
                continue
            if spec.continuous:
                yield Run(HOG_CHUNK_NS, user=True)
                continue
            yield Run(spec.busy_ns, user=True)     # periodic_job(), as kenv.workloads.load
            nxt += spec.period_ns
            while nxt <= eng.now:
                nxt += spec.period_ns
            eng.at(nxt, k.wake_up_process, task)
            yield BLOCK

    def _follow(self, task) -> None:
        """Load balancing moved modprobe: a probe thread on its new CPU (after the balance)."""
        if task.cpu not in self.ct.cpus:
            self.ct.cpus.append(task.cpu)
            self.k.engine.at(self.k.now, self.ct.spawn, len(self.ct.cpus) - 1, task.cpu)

    @property
    def done(self) -> bool:
        return self.mp.done

    @property
    def windows_done(self) -> int:
        return len(self.mp.sel.windows)

    def begin_step(self, mode: str) -> None:
        self.mp.sel.mode = mode
        if self._stepped:
            self.step_no += 1
        self._stepped = True
        if self._job_parked and self.schedule.phase(self.step_no) == JOB:
            self.k.wake_up_process(self._job)
        self._n0 = len(self.mp.sel.windows)
        for st in self.ct.stats:
            st.max_ns = 0  # the probe's Max is read per step

    def end_step(self) -> dict:
        k, sel = self.k, self.mp.sel
        self.steps += 1
        worst = 0
        for st in self.ct.stats:
            if st.max_ns > worst:
                worst = st.max_ns
        for task in self.ct.tasks:
            if task.state == TASK_RUNNABLE:
                # a wakeup still waiting for the CPU counts with what it has waited so far
                worst = max(worst, k.now - self.ct.fired_at.get(task.pid, k.now))
        latency = log_latency(worst / 1000.0)
        win = sel.windows[-1] if len(sel.windows) > self._n0 else None
        lost = win.lost_fraction if win is not None else 0.0
        self.last = [latency, lost]
        m = {"latency": latency, "throughput": 0.0,
             "raw": {"worst_wakeup_us": worst / 1000.0, "window": dict(NO_WINDOW) if win is None else
                     {"algo": win.algo, "kind": win.kind, "perf": int(win.perf), "mb_s": int(win.mb_s),
                      "lost_fraction": float(lost)}}}
        if self.mp.done and not self.credited:
            self.credited = True
            chosen = self.plat.raid6.by_name(sel.chosen)
            fastest = self.plat.raid6.fastest()
            ratio = chosen.gen_mb_s / fastest.gen_mb_s
            # The algorithm serves the machine from now on: its speed is credited
            # once for every step the benchmark took.
            m["throughput"] = ratio * self.steps
            self.result = {"chosen": sel.chosen, "best": fastest.name,
                           "chosen_gen_mb_s": float(chosen.gen_mb_s), "best_gen_mb_s": float(fastest.gen_mb_s),
                           "throughput_lost": 1.0 - ratio, "dmesg": "\n".join(sel.dmesg_lines()),
                           "load_s": self.mp.load_ns / NSEC_PER_SEC}
        return m

    @staticmethod
    def raw_at_reset() -> dict:
        """The step-only info entries before the first step (and of a step without raid6)."""
        return {"worst_wakeup_us": NO_VALUE, "window": dict(NO_WINDOW)}

    def load_observation(self) -> list[float]:
        """[a continuous hog on the benchmarking CPU, a periodic job on it]."""
        return [float(self.load is not None and self.load.continuous),
                float(self.load is not None and not self.load.continuous)]

    def progress_observation(self) -> list[float]:
        """[windows done / MAX_WINDOWS, the previous step's worst wakeup, its window's lost calls]."""
        return [min(1.0, len(self.mp.sel.windows) / MAX_WINDOWS)] + self.last

    def state_observation(self) -> list[float]:
        """[the benchmarking CPU's runqueue length / 4 (capped at 1)] (``phases=True``;
        kenv.envs.observation.RAID6_STATE)."""
        return [min(1.0, self.k.cpus[self.mp.task.cpu if self.mp.task is not None else self.cpu].nr_running / 4)]

    def info(self) -> dict:
        out = {"bench_cpu": self.cpu, "windows_done": len(self.mp.sel.windows), **self.result}
        if self.schedule is not None:
            out["load_phase"] = self.schedule.phase(self.step_no)
        return out
