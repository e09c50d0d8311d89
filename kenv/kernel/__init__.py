"""Kernel mechanisms, named as in Linux (see each module's docstring for its source file)."""

from .core import (
    BLOCK, COND_RESCHED, PREEMPT_MODELS, SCHED_FIFO, SCHED_NORMAL, Kernel, Run, RunUntil,
    SchedCosts, Task, check_preempt_model, cond_resched, migrate_disable,
    migrate_enable, preempt_disable, preempt_enable,
)
from .jiffies import ALLOWED_HZ, msecs_to_jiffies, usecs_to_jiffies
from .rcu import RcuStall
from .sleep import (
    completion, complete_all, msleep, schedule_timeout, schedule_timeout_interruptible,
    usleep_range, wait_for_completion_interruptible_timeout,
)
from .timer import calc_wheel_index, timer_list, timer_pending
from .workqueue import queue_work_on, schedule_work_on, system_highpri_wq, system_wq, work_struct

__all__ = [
    "ALLOWED_HZ", "BLOCK", "COND_RESCHED", "PREEMPT_MODELS", "SCHED_FIFO", "SCHED_NORMAL",
    "Kernel", "RcuStall", "Run", "RunUntil", "SchedCosts", "Task", "calc_wheel_index",
    "check_preempt_model", "complete_all", "completion", "cond_resched", "migrate_disable",
    "migrate_enable", "msecs_to_jiffies", "msleep", "preempt_disable", "preempt_enable",
    "queue_work_on", "schedule_timeout", "schedule_timeout_interruptible", "schedule_work_on",
    "system_highpri_wq", "system_wq", "timer_list", "timer_pending", "usecs_to_jiffies",
    "usleep_range", "wait_for_completion_interruptible_timeout", "work_struct",
]
