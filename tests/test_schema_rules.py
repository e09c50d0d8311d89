"""kenv.schema's general rules (issue 39 item 3: one schema, no hand-written validator
for an input a model covers): a value from a fixed list (``check_choice``), a switch
(``check_bool``), a real number (``check_number``), a name or path (``NameOrPath``), and
the inputs whose hand checks they replaced.  Every refusal is one ConfigError line
naming the field, the value and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kenv.cli import main
from kenv.errors import ConfigError
from kenv import schema

CHOICES = (64, 1024, "timer", "workqueue")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2000, 2000), st.floats(allow_nan=True),
                    st.sampled_from(CHOICES + ("64", "Timer", 64.5, 1024.0)), st.text(max_size=8))


def _one_line(e: ConfigError, field: str) -> str:
    msg = str(e)
    assert "\n" not in msg and msg.startswith(f"{field}: got ") and "; allowed: " in msg, msg
    return msg


@given(SCALARS)
def test_check_choice_is_membership(value):
    """A value is taken exactly when ``value in choices`` (``==``: 1024.0 is 1024), and
    comes back as the choice itself; anything else is one line listing the choices."""
    if value in CHOICES:
        got = schema.check_choice(value, "mode", CHOICES)
        assert got == value and got in CHOICES and type(got) is type(CHOICES[CHOICES.index(value)])
    else:
        with pytest.raises(ConfigError) as e:
            schema.check_choice(value, "mode", CHOICES)
        assert _one_line(e.value, "mode").endswith("allowed: 64, 1024, timer, workqueue")


@pytest.mark.parametrize("value", [1, 0, "True", None, 1.0, np.bool_(True), [True]])
def test_check_bool_takes_only_python_bools(value):
    with pytest.raises(ConfigError) as e:
        schema.check_bool(value, "boot_states", "True or False")
    assert "True or False" in _one_line(e.value, "boot_states")
    assert schema.check_bool(True, "x") is True and schema.check_bool(False, "x") is False


@given(st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(), st.text(max_size=4)))
def test_check_number_is_a_finite_number_in_its_bounds(value):
    ok = (value is not None and not isinstance(value, (bool, str)) and np.isfinite(value)
          and 0 < value <= 86_400)
    if ok:
        assert schema.check_number(value, "seconds", 0.0, 86_400.0, "seconds") == float(value)
    else:
        with pytest.raises(ConfigError) as e:
            schema.check_number(value, "seconds", 0.0, 86_400.0, "seconds in (0, 86400]")
        _one_line(e.value, "seconds")
    assert schema.check_number(None, "seconds", 0.0, 1.0, "x", optional=True) is None


@pytest.mark.parametrize("value", ["", "a\x00b", 3, b"ppo", "x" * 5000])
def test_a_name_or_path_is_a_non_empty_os_string(value):
    with pytest.raises(ConfigError) as e:
        schema.check_name_or_path(value, "--config", "a packaged name or a path to a YAML file")
    _one_line(e.value, "--config")


# ------------------------------------------------- the inputs the rules now check

def _cli_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    return err[0]


def test_env_wrapper_error_names_each_allowed_wrapper_once(tmp_path, capsys):
    """The allowed wrappers were listed twice: kenv's words, then pydantic's restatement
    of the same Literal's choices."""
    (tmp_path / "ppo.yaml").write_text("kenv/Raid6Bench-v0: {n_timesteps: 1024, env_wrapper: os.system}\n")
    line = _cli_error(capsys, ["train", "--config", str(tmp_path / "ppo.yaml"), "--env", "kenv/Raid6Bench-v0"])
    assert "env_wrapper" in line and "'os.system'" in line
    assert line.count("gymnasium.wrappers.TimeLimit") == 1, line


def test_hwrng_dd_names_the_hwrng_platforms_for_any_other(capsys):
    """An unknown platform was answered with every platform, most of which have no bcm2835
    rng and are refused next (x86-avx2)."""
    line = _cli_error(capsys, ["experiment", "hwrng-dd", "--platform", "foo"])
    assert "--platform" in line and "rpi3bplus" in line and "bcm2835-kernelci" in line
    assert "x86-avx2" not in line, line


def test_hwrng_parameters_are_integers_not_bools():
    """``isinstance(True, int)`` let a bool through as a word rate or a FIFO depth."""
    from kenv.drivers.hwrng import Bcm2835Params

    good = dict(word_rate_hz=1000, fifo_words=4, probe_ns=0, rng_readl_ns=100, copy_chunk_ns=100)
    Bcm2835Params(**good)
    for field in ("word_rate_hz", "fifo_words", "probe_ns", "silent_until_ns", "warmup_bits_per_number"):
        with pytest.raises(ConfigError) as e:
            Bcm2835Params(**{**good, field: True})
        _one_line(e.value, f"hwrng.{field}")


def test_a_choice_error_lists_the_choices_once():
    """kenv's words say what fits; pydantic's literal_error restated it in its own."""
    import gymnasium as gym

    import kenv  # noqa: F401

    with pytest.raises(ConfigError) as e:
        gym.make("kenv/HwrngWait-v0", render_mode="bogus")
    assert _one_line(e.value, "render_mode").count("rgb_array") == 1, str(e.value)
