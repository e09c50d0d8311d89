"""One declaration per env version (kenv.envs.versions; issue #39 item 2): the registered
ids come from the declarations, an env built from keyword arguments is the version they
declare, and nothing about a version is assigned on an instance."""

from __future__ import annotations

import contextlib
import itertools
import pickle

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.envs.observation import obs_rows
from kenv.envs.raid6_bench import Raid6BenchEnv
from kenv.envs.registration import ENV_CLASSES, ENV_IDS, RENAMED, VERSIONS
from kenv.errors import ConfigError


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_id_is_registered_from_its_declaration_and_makes_it(env_id):
    version = VERSIONS[env_id]
    spec = gym.spec(env_id)
    assert spec.kwargs == dict(version.kwargs) and spec.max_episode_steps == version.max_episode_steps
    env = gym.make(env_id)
    assert env.unwrapped.version is version
    # a class attribute's name is never set on the instance: what a version is lives in its record
    assert not [k for k in vars(env.unwrapped) if k.isupper()]
    env.reset(seed=1)
    env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    assert clone.version is version
    env.close()


def test_every_declared_version_is_registered_once():
    declared = [v.id for cls in ENV_CLASSES for v in cls.VERSIONS]
    assert sorted(declared) == sorted(ENV_IDS) and len(set(declared)) == len(declared)


@pytest.mark.parametrize("make, version_id", [
    (lambda: Raid6BenchEnv(), "kenv/Raid6Bench-v3"),
    (lambda: Raid6BenchEnv(load_balance=True), "kenv/Raid6BenchBalanced-v0"),
    # the phased version's shape, without the load balancing its id turns on
    (lambda: Raid6BenchEnv(phases=True), "kenv/Raid6BenchPhased-v0"),
    (lambda: HwrngWaitEnv(scenario="hwrng-control"), "kenv/HwrngWaitControl-v0"),
    (lambda: HwrngWaitEnv(scenario={"preempt": "rt"}), "kenv/HwrngWait-v2"),
    (lambda: KernelEnv(load_balance=True), "kenv/Kernel-v3"),
    (lambda: KernelEnv(boot_states=True), "kenv/KernelBoot-v0"),
])
def test_keyword_arguments_choose_the_version(make, version_id):
    assert make().version.id == version_id


def test_a_combination_no_version_declares_names_them():
    with pytest.raises(ConfigError) as e:
        KernelEnv(phases=True)
    assert e.value.field == "phases" and e.value.value is True
    assert "boot_states=True, phases=True (kenv/KernelPhased-v0)" in e.value.allowed
    assert "boot_states=False, phases=False (kenv/Kernel-v3)" in e.value.allowed


def test_a_mix_file_is_read_by_the_versions_with_its_fields(tmp_path):
    # raid6.yaml says env: kenv/Raid6Bench-v3; Raid6BenchBalanced-v0 has the same scenario fields
    assert Raid6BenchEnv(load_balance=True, scenario="raid6").mix.name == "raid6"
    # kernel.yaml is Kernel-v3's; KernelBoot-v0 adds the field ``start``
    with pytest.raises(ConfigError) as e:
        KernelEnv(boot_states=True, scenario="kernel")
    assert e.value.field.endswith("env") and e.value.value == "kenv/Kernel-v3"
    assert e.value.allowed == "kenv/KernelBoot-v0"
    # a file of before the renaming names an old id: read as its new one
    old = tmp_path / "old.yaml"
    old.write_text("name: old\nenv: kenv/Raid6Bench-v1\nmix:\n  preempt: full\n")
    assert Raid6BenchEnv(scenario=str(old)).mix.fields["preempt"] == {"full": 1.0}


@pytest.mark.parametrize("cls", ENV_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("phases, boot_states, load_balance, irq_threads",
                         list(itertools.product((False, True), repeat=4)))
def test_the_version_has_the_own_keywords_given_and_its_entries_are_the_envs(
        cls, phases, boot_states, load_balance, irq_threads):
    """Every combination of the own keywords and the kernel options: the env is a version
    with the own keywords' values (or a ConfigError if none is), and its spaces, fields and
    info keys are that version's."""
    kw = {"phases": phases, "load_balance": load_balance, "irq_threads": irq_threads}
    if cls is KernelEnv:
        kw["boot_states"] = boot_states
    try:
        env = cls(**kw)
    except ConfigError as e:
        assert (e.field in ("load_balance", "irq_threads") and e.field not in cls.KERNEL_OPTIONS
                or cls is KernelEnv and phases and not boot_states), e
        return
    v = env.version
    assert all(v.kwargs.get(k, False) == kw[k] for k in ("phases", "boot_states") if k in kw)
    assert env.phases == phases == bool(v.phase_fields)
    assert env.obs_rows[:len(obs_rows(v.observation))] == obs_rows(v.observation)
    assert set(env.mix.fields) == set(v.scenario_fields)
    assert set(env.reset(seed=0)[1]) == {k for e in v.info for k in e.keys}


@pytest.mark.parametrize("env_id", ["kenv/Kernel-v0", "kenv/Raid6Bench-v1", "kenv/KernelBoot-v0"])
def test_a_pickled_env_is_still_made_as_its_id(env_id):
    """A copy of an env made by gym.make (an old id's too) keeps its spec: an unpickled env
    (the wrappers' spec not read before pickling) was made as its version's id, spec None."""
    env = gym.make(env_id)
    for copy in (pickle.loads(pickle.dumps(env)), pickle.loads(pickle.dumps(env.unwrapped))):
        assert copy.spec is not None and copy.spec.id == env_id
        assert copy.unwrapped.made_as == env_id


@pytest.mark.parametrize("env_id, kwargs, made", [
    ("kenv/Raid6Bench-v3", {"load_balance": True}, "kenv/Raid6BenchBalanced-v0"),
    ("kenv/Raid6BenchBalanced-v0", {"load_balance": False}, "kenv/Raid6Bench-v3"),
    ("kenv/RandomMix-v2", {"phases": True}, "kenv/RandomMixPhased-v0"),
    ("kenv/Kernel-v3", {"boot_states": True}, "kenv/KernelBoot-v0"),
    ("kenv/KernelBoot-v0", {"phases": True}, "kenv/KernelPhased-v0"),
    ("kenv/Kernel-v2", {"phases": False}, "kenv/KernelBoot-v0"),        # an old id
    ("kenv-flat/Raid6Bench-v3", {"load_balance": True}, "kenv/Raid6BenchBalanced-v0")])
def test_keywords_that_make_another_version_of_an_id_are_a_clear_error(env_id, kwargs, made):
    """gym.make(id, **kwargs) whose kwargs make another registered version: a ConfigError
    naming the keyword, its value and the id to make (it gave the other version's dynamics
    under ``env_id``'s spec, which records and scores then named)."""
    with pytest.warns() if env_id in RENAMED else contextlib.nullcontext():
        with pytest.raises(ConfigError) as e:
            gym.make(env_id, **kwargs)
    name = next(iter(kwargs))
    assert e.value.field == name and e.value.value == kwargs[name] and made in e.value.allowed


def test_keywords_that_keep_the_version_still_make_the_id():
    env = gym.make("kenv/Raid6BenchBalanced-v0", load_balance=True, profile="latency")
    assert env.spec.id == "kenv/Raid6BenchBalanced-v0" == env.unwrapped.version.id
    assert gym.make("kenv/Kernel-v3", load_balance=True).unwrapped.version.id == "kenv/Kernel-v3"
    # a scenario is any id's choice (the controls are HwrngWait-v2 with a packaged mix)
    assert gym.make("kenv/HwrngWait-v2", scenario="hwrng-control").spec.kwargs["scenario"] == "hwrng-control"


def test_an_env_offers_only_kernel_options_kenvenv_takes():
    """A record's kernel_options may set only KERNEL_OPTION_KEYWORDS (kenv validate): an env
    class offering another keyword as a kernel option is refused when it is defined."""
    from kenv.envs.base import KERNEL_OPTION_KEYWORDS, KenvEnv

    assert all(set(c.KERNEL_OPTIONS) <= set(KERNEL_OPTION_KEYWORDS) for c in ENV_CLASSES)
    assert {o for c in ENV_CLASSES for o in c.KERNEL_OPTIONS} == set(KERNEL_OPTION_KEYWORDS)
    with pytest.raises(TypeError, match="KERNEL_OPTIONS"):
        type("Phased", (KenvEnv,), {"KERNEL_OPTIONS": ("phases",)})
