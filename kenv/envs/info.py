"""Info keys declared once.

Every env returns the same info keys with the same types at every ``reset()``
and ``step()`` (DESIGN.md, Contracts).  Each key, or each few keys documented
together, is one :class:`Info`: the keys, the Python type of each value, what
they mean and what reset() reports for them.  An env lists its ``Info`` in
the order of its docstring's table; the table is written from that list
(kenv.envs.doctables) and tests/test_doctables.py checks the list against what
the env returns.  The keys most envs share are declared here.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Info:
    """One info key, or a few documented together."""

    keys: tuple[str, ...]
    #: the type of each key's value (``type(info[key])``)
    types: tuple[type, ...]
    meaning: str
    #: reset()'s value where it is not the state's (a step-only key's neutral value)
    at_reset: str = ""
    #: the docstring's type where the Python type says too little
    type_text: str = ""

    def __post_init__(self):
        if len(self.types) != len(self.keys):
            raise ValueError(f"{self.keys}: one type per key")

    def with_meaning(self, meaning: str, at_reset: str | None = None) -> Info:
        """The same keys as another env explains them."""
        return dataclasses.replace(self, meaning=meaning, at_reset=self.at_reset if at_reset is None else at_reset)


def info_types(entries: Sequence[Info]) -> dict[str, type]:
    """The type of each declared key."""
    return {k: t for e in entries for k, t in zip(e.keys, e.types)}


def _one(key: str, t: type, meaning: str, at_reset: str = "", type_text: str = "") -> Info:
    return Info((key,), (t,), meaning, at_reset, type_text)


# ------------------------------------------------------------ every env
#: the keys the env shell adds (kenv.envs.base.KenvEnv._info)
SHELL = (
    _one("scenario", dict, "the episode's scenario fields (see Arguments): ``int`` where every allowed choice is "
         "an integer, else ``str`` (e.g. ``hz``: ``\"platform\"`` or ``\"250\"``)"),
    _one("profile", str, "reward profile name"),
    _one("reward_components", dict, "the step's components (see Rewards)", "all 0.0", "dict of float"),
    _one("action_name", str, "the action taken", '``""``'),
)
MACHINE = (
    Info(("platform", "preempt"), (str, str), "the machine and its preemption model (resolved)"),
    _one("hz", int, "CONFIG_HZ (resolved)"),
)
SIM_TIME = _one("sim_time_s", float, "simulated time since boot")


def kernel_reports(bugs_of: str = "", stalls_of: str = "") -> tuple[Info, ...]:
    """The kernel's reports (kenv.subsystems.common.kernel_reports_info), of the
    kernels named in ``bugs_of`` and ``stalls_of`` where an env has several."""
    return (
        _one("bugs", int, "kernel BUG reports so far" + (f" ({bugs_of})" if bugs_of else "")),
        _one("last_bug", str, "the last one", '``""`` before any'),
        _one("rcu_stalls", int, "RCU stall reports so far" + (f" ({stalls_of})" if stalls_of else "")),
        Info(("last_rcu_stall_t_s", "last_rcu_stall_cpu"), (float, int), "time and CPU of the last one",
             "-1.0, -1 before any"),
    )


BITS_CREDITED = _one("bits_credited", int, "bits credited in the step", "0")
STEP_SIM = _one("step_sim_s", float, "simulated time of the step", "0.0")

# ------------------------------------------------------------ one input pool (HwrngWait, Kernel)
POOL = (
    _one("crng_init", int, "crng state: 0 EMPTY, 1 EARLY, 2 READY"),
    _one("bits_credited_total", int, "bits credited to the input pool so far"),
    _one("crng_ready_s", float, "when the crng became READY", "-1.0 until then"),
)

# ------------------------------------------------------------ qperf (RandomMix, Kernel)
MSG_SIZE = _one("msg_size", str, "qperf message size")
QPERF_STEP = (
    _one("latency_us", float, "the step's mean tcp_lat", "-1.0"),
    _one("clean_latency_us", float, "the undisturbed tcp_lat of the size", "-1.0"),
    _one("round_trips", int, "qperf round trips completed in the step", "0"),
    _one("mixes", int, "fast-pool mixes in the step (both hosts)", "0"),
)
TRAFFIC_PHASE = _one("traffic_phase", str, "the step's message size (``64 KiB``) or ``pause``",
                     "the first step's")

# ------------------------------------------------------------ hwrng (HwrngWait, Kernel)
HWRNG = (
    _one("wait", str, "the bcm2835 wait in force"),
    _one("reader_bytes", int, "bytes the /dev/hwrng reader has read"),
)
HWRNG_STEP = (
    _one("hwrng_bytes", int, "bytes read in the step", "0"),
    _one("hwrng_bytes_per_s", float, "the reader's rate over the step", "-1.0"),
    _one("spin_cpu_s", float, "CPU time spun in ``cpu_relax()`` in the step", "0.0"),
)
READER_PHASE = _one("reader_phase", str, "the reader's phase in the step, ``reader`` or ``idle``",
                    "the first step's (the boot runs in it)")

# ------------------------------------------------------------ raid6 (Raid6Bench, Kernel)
RAID6 = (
    _one("bench_cpu", int, "the CPU modprobe and cyclictest run on"),
    _one("windows_done", int, "benchmark windows done"),
    Info(("chosen", "best"), (str, str), "the algorithm raid6_choose_gen() chose, and the fastest",
         '``""`` until modprobe exits'),
    Info(("chosen_gen_mb_s", "best_gen_mb_s"), (float, float), "their gen() speeds", "-1.0 until then"),
    _one("throughput_lost", float, "1 - chosen/fastest speed", "-1.0 until then"),
    _one("dmesg", str, "the benchmark's dmesg lines, newline-separated", '``""`` until then'),
    _one("load_s", float, "modprobe's run time", "-1.0 until then"),
)
WORST_WAKEUP = _one("worst_wakeup_us", float, "the step's worst cyclictest wakeup", "-1.0")
WINDOW = _one("window", dict, "the benchmark window that ended in the step: ``algo``, ``kind`` (gen/xor) str; "
              "``perf``, ``mb_s`` int; ``lost_fraction`` float",
              '``""``, ``""``, -1, -1, -1.0 (also in a step without a window)')
LOAD_PHASE = _one("load_phase", str, "the job's phase in the step, ``job`` or ``off``", "the first step's")

#: qperf's two hosts' pools (RandomMix): arrays of shape (2,), client then server
HOSTS_POOL = (
    _one("crng_init", np.ndarray, "crng state of client, server: 0 EMPTY, 1 EARLY, 2 READY",
         type_text="int64 array (2,)"),
    _one("bits_credited_total", np.ndarray, "bits credited so far, client, server", type_text="int64 array (2,)"),
    _one("crng_ready_s", np.ndarray, "when each crng became READY", "-1.0 until then", type_text="float64 array (2,)"),
)
