"""What the four kenv environments share: scenario draw, reward, spaces, info.

Each environment is a thin Gymnasium shell around a *simulation episode*
object (``_Episode`` subclasses in each env module) that owns one simulated
kernel, advances it by one decision epoch per step with the chosen kernel
strategy, and returns what the kernel measured.  The shell validates the
action, turns the measurement into reward components, weights them with the
reward profile and builds the observation.
"""

from __future__ import annotations

import inspect
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import ConfigError, UnknownKeywordError
from ..fastforward.hwrng import HwrngLearned
from ..schema import (
    check_fast_forward, check_kernel_option, check_load_balance, check_render_mode, check_reset_options, check_seed,
)
from ..subsystems.common import Decision
from ..workloads.qperf import QperfLearned
from .actions import DiscreteCodec, MultiDiscreteCodec
from .info import Info
from .observation import episode_reader, obs_rows, observe
from .reward import COMPONENTS, RewardProfile, load_profile
from .scenario import ScenarioMix, build_mix, mix_env_ids, phase_fields_elsewhere
from .versions import Version, check_made_as, version_for


#: the default of each reward component a step does not report
_ZEROS = (0.0,) * len(COMPONENTS)


#: the reward components in reset()'s info (no step yet)
_NO_COMPONENTS = MappingProxyType(dict.fromkeys(COMPONENTS, 0.0))


def scenario_field_types(fields: Mapping[str, Sequence[Any]]) -> dict[str, type]:
    """The type of each scenario field in ``info["scenario"]``: ``int`` where every
    allowed choice is an integer, else ``str`` (e.g. ``hz``: "platform" or "250"), so
    that every episode reports a field with one type (a vector env stacks it)."""
    return {f: int if all(type(c) is int for c in choices) else str for f, choices in fields.items()}


class FastForwardMemory:
    """What an env's fast-forwards have learned (kenv.fastforward.hwrng,
    kenv.fastforward.qperf): the env's own, carried across its episodes and
    bounded (each part keeps a fixed number of tables)."""

    __slots__ = ("hwrng", "qperf")

    def __init__(self) -> None:
        self.hwrng = HwrngLearned()
        self.qperf = QperfLearned()


#: keyword arguments that client libraries pass to every env by convention and drop when
#: the env refuses them with a TypeError about an unexpected keyword: TorchRL's GymEnv
#: passes ``frameskip`` (torchrl/envs/libs/gym.py, ACCEPTED_TYPE_ERRORS).  (Gymnasium's
#: ``render_mode``, the other one it lists, every kenv env takes.)
CLIENT_KEYWORDS = frozenset({"frameskip"})

#: the keyword arguments of KenvEnv.__init__ that turn on a kernel option (other dynamics
#: under the same id; an env's KERNEL_OPTIONS says which it offers): the only ones a record
#: may carry (kenv validate, kernel_options)
KERNEL_OPTION_KEYWORDS = ("load_balance", "irq_threads")


class KenvEnv(gym.Env):
    """Base class; see the subclasses' docstrings for the documentation pages."""

    #: ``ansi``: a text line about the last step; ``rgb_array``: a per-CPU
    #: timeline image of the last step (kenv.trace.render), for RecordVideo
    metadata: ClassVar[dict] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    #: set by subclasses: the versions of the env, each declared once
    #: (kenv.envs.versions); the first is the env's base version
    VERSIONS: ClassVar[tuple[Version, ...]] = ()
    #: the kernel decision the action makes (kenv.subsystems); it gives the
    #: action names and the baselines' choices below
    DECISION: ClassVar[Decision | None] = None
    #: or the decisions of a MultiDiscrete action, one dimension each (Kernel-v3)
    DECISIONS: ClassVar[Mapping[str, Decision]] = MappingProxyType({})
    DEFAULT_ACTIONS: ClassVar[tuple[str, ...]] = ()
    EXTENDED_ACTIONS: ClassVar[tuple[str, ...]] = ()
    #: the docstring tables' text for the previous action's entries after them
    PREVIOUS_ACTION: ClassVar[str] = "previous action one-hot (all zero after reset)"
    #: the choices of the fixed baselines (agents/baselines.py)
    ORIGINAL: ClassVar[Any] = None
    PRE_PATCH: ClassVar[Any] = None
    PATCHED: ClassVar[Any] = None
    #: the kernel options this env can turn on (keyword arguments, of
    #: KERNEL_OPTION_KEYWORDS; some versions pass them, Version.kwargs)
    KERNEL_OPTIONS: ClassVar[tuple[str, ...]] = ()
    #: the keyword arguments this env takes, with their defaults (set per class by
    #: __init_subclass__)
    _DEFAULTS: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    _KEYWORDS: ClassVar[tuple[str, ...]] = ()
    #: the spec gym.make made the env from (:attr:`spec`)
    _spec: gym.envs.registration.EnvSpec | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # the keyword arguments the env's __init__ chain takes, with their defaults (read
        # once per class, for __new__ and the choice of the version)
        defaults: dict[str, Any] = {}
        for c in cls.__mro__:
            if issubclass(c, KenvEnv) and "__init__" in c.__dict__:
                for p in inspect.signature(c.__dict__["__init__"]).parameters.values():
                    if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
                        defaults.setdefault(p.name, p.default)
        if not set(cls.KERNEL_OPTIONS) <= set(KERNEL_OPTION_KEYWORDS):
            raise TypeError(f"{cls.__name__}.KERNEL_OPTIONS {cls.KERNEL_OPTIONS}: not of {KERNEL_OPTION_KEYWORDS}")
        cls._DEFAULTS = MappingProxyType(defaults)
        cls._KEYWORDS = tuple(defaults)
        d = cls.__dict__.get("DECISION")
        if d is not None:
            cls.DEFAULT_ACTIONS, cls.EXTENDED_ACTIONS = d.default, d.extended
            cls.ORIGINAL, cls.PRE_PATCH, cls.PATCHED = d.original, d.pre_patch, d.patched
        ds = cls.__dict__.get("DECISIONS")
        if ds:
            cls.ORIGINAL, cls.PRE_PATCH, cls.PATCHED = (
                tuple(getattr(d, kernel) for d in ds.values()) for kernel in ("original", "pre_patch", "patched"))

    def __new__(cls, *args, **kwargs):
        """Refuse a keyword argument the env does not take with a ConfigError naming it,
        its value and the env's keyword arguments (Python's TypeError names neither).
        A keyword that client libraries pass by convention (:data:`CLIENT_KEYWORDS`) is
        refused with the TypeError they fall back on (:class:`UnknownKeywordError`)."""
        names = cls._KEYWORDS
        for name, value in kwargs.items():
            if name not in names:
                error = UnknownKeywordError if name in CLIENT_KEYWORDS else ConfigError
                ids = ", ".join(v.id for v in cls.VERSIONS)
                raise error(name, value, f"none: {cls.__name__} ({ids}) takes "
                                  f"no {name}; its keyword arguments: {', '.join(names)}")
        return super().__new__(cls)

    def __init__(self, own: Mapping[str, Any] = MappingProxyType({}), /, *, actions: Sequence[str] | None = None,
                 scenario: Any = None, profile: str | RewardProfile = "balanced",
                 reward_weights: Mapping[str, float] | None = None, render_mode: str | None = None,
                 fast_forward: bool = True, load_balance: bool = False, irq_threads: bool = False):
        """``own``: the subclass's own keyword arguments (``phases``, ``boot_states``),
        checked; with the others they choose the env's version (:attr:`version`)."""
        self._init_kwargs = dict(actions=actions, scenario=scenario, profile=profile,
                                 reward_weights=reward_weights, render_mode=render_mode,
                                 fast_forward=fast_forward, load_balance=load_balance)
        if irq_threads:   # (only when on: the saved kwargs of every other env stay as they were)
            self._init_kwargs["irq_threads"] = irq_threads
        self._init_kwargs.update(own)   # (pickling rebuilds the same version)
        #: what this env is: its id, scenario fields, observation and info (kenv.envs.versions)
        self.version: Version = version_for(self.VERSIONS, own, self._init_kwargs, self._DEFAULTS)
        version = self.version
        #: CFS load balancing in the simulated kernels (kenv.kernel.balance):
        #: the variants' dynamics (Raid6BenchBalanced-v0) of the envs whose KERNEL_OPTIONS name it
        self.load_balance = check_load_balance(load_balance, version.id, self.KERNEL_OPTIONS)
        #: PREEMPT_RT's forced interrupt threads simulated (kenv.kernel.irq) on
        #: the scenarios with preempt "rt": the variants' dynamics of the envs whose
        #: KERNEL_OPTIONS name it
        self.irq_threads = check_kernel_option(irq_threads, "irq_threads", version.id, self.KERNEL_OPTIONS,
                                               "simulated interrupt threads")
        self.render_mode = check_render_mode(render_mode)
        #: skip what the fast-forwards can compute exactly (False: simulate
        #: everything in detail; the same trajectories, slower), with this
        #: env's own memory of what they learned (None when off)
        self.fast_forward = check_fast_forward(fast_forward)
        self.ff_memory: FastForwardMemory | None = FastForwardMemory() if fast_forward else None
        #: the action: its space, names, reading and checking (kenv.envs.actions)
        self.codec = (MultiDiscreteCodec(self.DECISIONS, actions) if self.DECISIONS
                      else DiscreteCodec(self.DECISION, actions))
        self.actions = self.codec.names
        self.profile = load_profile(profile, reward_weights)
        # the phase fields of the other versions, with what they need (told when one is given)
        self._elsewhere = phase_fields_elsewhere(version, self.VERSIONS)
        self.mix: ScenarioMix = build_mix(mix_env_ids(version, self.VERSIONS), version.scenario_fields,
                                          version.default_scenario, scenario, within_episode=version.phase_fields,
                                          elsewhere=self._elsewhere)
        self.action_space = self.codec.space
        self.obs_rows = self.observation_rows()
        low = np.array([r[1] for r in self.obs_rows], dtype=np.float32)
        high = np.array([r[2] for r in self.obs_rows], dtype=np.float32)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        # the bounds of the episode's rows (version.observation) as floats, for _obs's clip
        # (clipping in float64 first keeps the float32 value inside the Box:
        # rounding to float32 is monotonic); the previous-action rows after them
        # are 0 or 1 by construction
        episode_rows = self.obs_rows[:len(self.obs_rows) - len(self.codec.rows())]
        self._obs_low = [float(r[1]) for r in episode_rows]
        self._obs_high = [float(r[2]) for r in episode_rows]
        self._episode = None
        # what _obs reads from the episode (kenv.envs.observation.episode_reader)
        self._obs_parts: tuple = ()
        self._prev_feats: dict = {}
        self._scenario: dict | None = None
        self._scenario_types = scenario_field_types(version.scenario_fields)
        self._phase_rng: np.random.Generator | None = None
        self._scenario_info: dict = {}
        self._last: dict | None = None
        self._last_action: int | None = None
        # For pickling by replay: the generator state at the last reset, its
        # options, and the actions taken since (the simulation is a function of them).
        self._replay: tuple[dict, dict | None] | None = None
        self._taken: list[int] = []
        # render_mode "rgb_array": records the episode's last step, from the first
        # render() of the episode on (_arm_timeline); None until then
        self._timeline = None

    def observation_rows(self) -> list[tuple[str, float, float]]:
        """(meaning, min, max) of each observation entry: the version's rows, then
        a one-hot of the previous action (all zero after reset)."""
        return obs_rows(self.version.observation) + self.codec.rows()

    def info_entries(self) -> tuple[Info, ...]:
        """The declared info keys of this env's version (kenv.envs.info)."""
        return self.version.info

    @property
    def phases(self) -> bool:
        """Whether the workloads change within an episode (the version has phase fields)."""
        return bool(self.version.phase_fields)

    # --------------------------------------------------------------- actions
    def _prev_action_features(self) -> list[float]:
        feats = self._prev_feats.get(self._last_action)
        if feats is None:   # one list per previous action, built once (never mutated)
            feats = self._prev_feats[self._last_action] = self.codec.features(self._last_action)
        return feats

    def action_label(self, action: Any) -> str:
        """The name of ``action`` (a ConfigError if it is not one of this env's)."""
        return self.codec.label(self.codec.index(action))

    def action_for(self, choice: Any, baseline: str = "") -> Any:
        """The action of a named choice (for the fixed baselines)."""
        return self.codec.action_for(choice, baseline)

    # -------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        seed = check_seed(seed)
        override = check_reset_options(options, self.version.scenario_fields, self._elsewhere)   # (before anything changes)
        super().reset(seed=seed)
        # what replays the episode (_replay_episode): the generator state at this
        # reset (the state property builds a new dict: nothing else holds it) and
        # the checked scenario override (a new dict of canonical values, or None)
        self._replay = (self.np_random.bit_generator.state, override)
        self._taken = []
        return self._start(override)

    def _start(self, override: dict | None):
        scenario = self.mix.sample(self.np_random)
        if override:
            scenario.update(override)
        self._scenario = scenario
        self._scenario_info = {f: t(scenario[f]) for f, t in self._scenario_types.items() if f in scenario}
        sim_seed = int(self.np_random.integers(0, 2**63 - 1))
        # the phase schedule's own generator (drawn after the simulation's seed:
        # without phases nothing else is drawn, so the base tasks' episodes are unchanged)
        self._phase_rng = (np.random.default_rng(int(self.np_random.integers(0, 2**63 - 1)))
                           if self.phases else None)
        self._episode = self._make_episode(scenario, np.random.default_rng(sim_seed))
        self._obs_parts = episode_reader(self.version.observation, self._episode)
        self._last = None
        self._last_action = None
        self._timeline = None    # (rgb_array: recording starts with the episode's first render())
        return self._obs(), self._info({}, None)

    def step(self, action):
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        a = self.codec.index(action)
        self._taken.append(a)
        if self._timeline is not None:
            self._timeline.begin_step()
        m = self._episode.step(self.codec.kernel_action(a))
        if self._timeline is not None:
            self._timeline.end_step(a)
        # the components in COMPONENTS order (map: no Python frame per entry)
        values = list(map(float, map(m.get, COMPONENTS, _ZEROS)))
        comps = dict(zip(COMPONENTS, values))
        reward = self.profile.reward_of(values)
        self._last = m
        self._last_action = a
        terminated = bool(m.get("terminated", False))
        info = self._info(m, comps)
        return self._obs(), reward, terminated, False, info

    # ------------------------------------------------------------- pickling
    def __getstate__(self):
        """An env pickles as its constructor arguments plus the seed state and
        actions of the current episode; unpickling replays them (the
        simulated kernel holds generators, which do not pickle).  The spec
        gym.make set goes with them: the copy is still made as its id
        (:attr:`made_as`, a record's ``env_id``)."""
        return {"kwargs": self._init_kwargs, "replay": self._replay, "taken": list(self._taken),
                "spec": self.spec}

    def __setstate__(self, state):
        self.__init__(**state["kwargs"])
        self.spec = state.get("spec")
        if state["replay"] is not None:
            self._np_random = np.random.Generator(np.random.PCG64())
            self._replay = state["replay"]
            self._taken = list(state["taken"])
            self._replay_episode()

    def _replay_episode(self, record: bool = False) -> None:
        """Rebuild the current episode from the generator state of its reset
        and the actions taken since (the simulation is a function of them),
        recording its steps from the start if ``record`` (rgb_array)."""
        rng_state, override = self._replay
        taken, self._taken = self._taken, []
        self.np_random.bit_generator.state = rng_state
        self._start(override)
        if record:
            self._timeline = self._make_timeline()
        for a in taken:
            self.step(a)

    @property
    def scenario(self) -> dict:
        """The scenario of the current episode as drawn from the mix (or forced by
        ``reset(options={"scenario": ...})``), with the mix's own values;
        ``info["scenario"]`` gives it with one type per field."""
        return dict(self._scenario or {})

    @property
    def scenario_override(self) -> dict | None:
        """The scenario fields the current episode's ``reset(options={"scenario": ...})``
        forced over the seed's draw, as checked (None: none forced, or no episode yet)."""
        override = None if self._replay is None else self._replay[1]
        return dict(override) if override else None

    def render(self):
        if self.render_mode == "ansi":
            return self._render_ansi()
        if self.render_mode == "rgb_array":
            if self._timeline is None and self._episode is not None:
                self._arm_timeline()
            return self._render_rgb()
        return None

    def _arm_timeline(self) -> None:
        """Record the episode's steps from now on (render_mode "rgb_array").

        Recording costs a step several times its time, so an episode records
        nothing until its first render(): an env nobody draws runs at full speed.
        Called right after reset() (RecordVideo, SB3's VecVideoRecorder) it costs
        nothing more.  Called later in the episode, the frame must still show the
        last step: the episode is rebuilt by replaying its seed and actions (the
        simulation is a function of them, as for pickling) with the recorder
        attached, once; every later step is recorded as it runs."""
        if not self._taken:
            self._timeline = self._make_timeline()
            return
        live_rng = self.np_random.bit_generator.state
        self._replay_episode(record=True)
        # (a step draws nothing from np_random: the replayed reset left it where it was)
        self.np_random.bit_generator.state = live_rng

    def _make_timeline(self):
        from ..trace import episode_kernels
        from ..trace.render import StepTimeline

        return StepTimeline(episode_kernels(self._episode))

    def _render_rgb(self) -> np.ndarray:
        """A per-CPU timeline of the last step, uint8 (HEIGHT, WIDTH, 3); blank rows before any."""
        if self._timeline is None:
            from ..trace.render import HEIGHT, WIDTH

            return np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        tl = self._timeline
        if self._last_action is not None:
            label = self.codec.label(self._last_action)
            tl.title = (f"{self.made_as}  step {len(self._taken)}  t={self._episode.now_s:.3f} s  action {label}")
            dims = np.asarray(self._last_action).reshape(-1).size
            tl.action_labels = label.split("|") if dims > 1 else [label]
        else:
            tl.title = f"{self.made_as}  step 0  t={self._episode.now_s:.3f} s  (reset)"
            tl.action_labels = []
        return tl.frame()

    @property
    def spec(self) -> gym.envs.registration.EnvSpec | None:
        """The spec gym.make made this env from (None if built directly)."""
        return self._spec

    @spec.setter
    def spec(self, spec: gym.envs.registration.EnvSpec | None) -> None:
        # gym.make sets it after building the env: a kenv id (an old one, a flat twin's) whose
        # version the keyword arguments given with it changed is refused (check_made_as)
        from .registration import FLAT_NAMESPACE, canonical_id

        if spec is not None:
            env_id = canonical_id(spec.id.replace(f"{FLAT_NAMESPACE}/", "kenv/", 1))
            registered = next((v for v in self.VERSIONS if v.id == env_id), None)
            if registered is not None:
                check_made_as(registered, self.version, self._init_kwargs, self._DEFAULTS)
        self._spec = spec

    @property
    def made_as(self) -> str:
        """The id this env was made as (gym.make's; else its version's)."""
        return self.spec.id if self.spec is not None else self.version.id

    def _render_ansi(self) -> str:
        env_id = self.made_as
        if self._last is None:
            return f"{env_id} scenario={self._scenario}\n"
        a = self.codec.label(self._last_action) if self._last_action is not None else "-"
        comps = ", ".join(f"{c}={self._last.get(c, 0.0):.3g}" for c in COMPONENTS)
        return f"{env_id} t={self._episode.now_s:.3f}s action={a} {comps}\n"

    # ------------------------------------------------------------- helpers
    def _info(self, m: Mapping, comps: Mapping | None) -> dict:
        # one dict display: cheaper than a dict and update() per part, every step.
        # reset() and step() give the same keys with the same types (the info
        # table of each env's docstring): reset() the step-only ones' neutral values
        if comps is None:    # reset()
            return {"scenario": self._scenario_info.copy(), "profile": self.profile.name,
                    "reward_components": dict(_NO_COMPONENTS), "action_name": "",
                    **self._episode.info(), **self._episode.raw_at_reset()}
        return {"scenario": self._scenario_info.copy(), "profile": self.profile.name,
                "reward_components": comps,  # a new dict every step
                "action_name": self.codec.label(self._last_action),
                **self._episode.info(), **m["raw"]}

    def _obs(self) -> np.ndarray:
        # The episode's entries clipped into the Box in Python: on a list this
        # short, cheaper than np.maximum and np.minimum on the array (their
        # per-call cost dominates, with caches cold as they are in a step).  The
        # previous-action one-hot that follows them is 0 or 1 by construction.
        # (zip ends with the episode's entries: the bounds lists hold only theirs.)
        return np.array([lo if x < lo else hi if x > hi else x
                         for x, lo, hi in zip(observe(self._obs_parts, self._episode), self._obs_low, self._obs_high)]
                        + self._prev_action_features(), dtype=np.float32)

    def _make_episode(self, scenario: dict, rng: np.random.Generator):  # pragma: no cover
        raise NotImplementedError
