"""Loading a saved SB3 model without running code from the file.

An SB3 ``.zip`` holds JSON (``data``), the weights (``*.pth``) and, inside ``data``,
fields SB3 cannot write as JSON (the policy class, the spaces, schedules, buffers),
each *cloudpickled*: ``BaseAlgorithm.load`` unpickles them, and unpickling runs
whatever the file says (a model from the internet is code).  kenv therefore loads
models for acting (``kenv evaluate --model``, ``kenv trace env --model``, rediscover's
and discover's evaluation) with :func:`load_model`, which unpickles nothing:

- every pickled field is given to SB3 through ``custom_objects`` (SB3 then skips it,
  ``stable_baselines3/common/save_util.py`` ``json_to_data``): the spaces are the env's
  own, checked against the readable shape and type SB3 writes beside each pickled field;
  the policy class is the algorithm's ``MlpPolicy`` (checked against the readable
  ``__module__``); ``policy_kwargs`` is rebuilt from its readable entries, where a class
  (``activation_fn``, ``optimizer_class``, ...) is taken only from torch's activations
  and optimisers and SB3's extractors; training state (last observations, episode
  buffers, schedules, buffer classes) is dropped, as acting does not read it;
- sizes that only training uses (rollout and replay buffers) are set to 1, and the layer
  sizes of ``policy_kwargs.net_arch`` must fit the weights the file holds
  (:func:`_net_weights`), so a file cannot make the loader allocate gigabytes;
- the weights are read by SB3 with ``torch.load(weights_only=True)`` and must match the
  rebuilt policy key for key and shape for shape.

A field it cannot check is refused with one line naming it; ``trust=True`` (the CLI's
``--trust-model``) restores SB3's full load for a file the user trusts.  Resuming a
training run (``kenv train --resume``) reads the run folder's own pickles: a run folder
is trusted like the code that wrote it (docs/clients.md).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import zipfile
from typing import Any

from kenv.errors import ConfigError

#: what --trust-model restores, said in every refusal
TRUST = "or pass --trust-model to let SB3 unpickle the file (that runs code from it)"
#: the largest ``data`` entry read (bytes); kenv's models hold about 10 KB
MAX_DATA_BYTES = 10_000_000
#: the largest model unpacked (bytes, all entries); a kenv model is under 1 MB
MAX_ZIP_BYTES = 1_000_000_000
#: the fewest bytes of ``policy.pth`` per weight (SB3 saves float32; 2 leaves room for half precision)
MIN_BYTES_PER_WEIGHT = 2
#: pickled fields that only training reads: dropped (None), SB3 rebuilds what it needs
TRAINING_STATE = frozenset({
    "_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer",
    "rollout_buffer_class", "replay_buffer_class", "exploration_schedule", "action_noise", "lr_schedule",
    "clip_range_vf",
})
#: modules whose classes may be named in policy_kwargs (by their readable ``<class '...'>``)
CLASS_MODULES = ("torch.nn.modules.activation", "torch.optim", "stable_baselines3.common.torch_layers",
                 "stable_baselines3.common.sb2_compat.rmsprop_tf_like")
_CLASS = re.compile(r"<class '([A-Za-z_][\w.]*)'>\Z")


def load_model(path: str, algo_cls, env, *, trust: bool = False, label: str = "--model"):
    """The SB3 model in the zip at ``path``, loaded as ``algo_cls`` to act in ``env``.

    Unless ``trust``, nothing in the file is unpickled (module docstring); any failure,
    a model trained on other spaces included, is a ConfigError naming ``label`` and ``path``.
    """
    if trust:
        model = algo_cls.load(path, device="cpu")
        if model.observation_space != env.observation_space or model.action_space != env.action_space:
            raise misfit(env, label, path, describe_space(model.observation_space),
                         describe_space(model.action_space))
        return model
    data, weight_bytes = _read_data(path, label)
    _check_net_arch(data, weight_bytes, path, label)
    custom = _custom_objects(data, algo_cls, env, path, label)
    try:
        return algo_cls.load(path, device="cpu", custom_objects=custom)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - weights that do not fit the rebuilt policy, a bad field
        why = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        raise ConfigError(label, path, f"an SB3 {algo_cls.__name__} model kenv can load without unpickling "
                                       f"({why}), {TRUST}") from None


def _read_data(path: str, label: str) -> tuple[dict, int | None]:
    """``data`` of the zip, and the size of its weights (``policy.pth`` unpacked; None without)."""
    try:
        with zipfile.ZipFile(path) as z:
            if sum(i.file_size for i in z.infolist()) > MAX_ZIP_BYTES:
                raise ConfigError(label, path, f"a model of at most {MAX_ZIP_BYTES:,} bytes unpacked")
            info = z.getinfo("data")
            if info.file_size > MAX_DATA_BYTES:
                raise ConfigError(label, path, f"a model whose 'data' is at most {MAX_DATA_BYTES:,} bytes")
            data = json.loads(z.read(info).decode("utf-8"))
            weight_bytes = z.getinfo("policy.pth").file_size if "policy.pth" in z.namelist() else None
    except KeyError:
        raise ConfigError(label, path, "an SB3 model .zip (no 'data' entry)") from None
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(label, path, f"an SB3 model .zip ({type(e).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigError(label, path, "an SB3 model .zip ('data' is not a JSON object)")
    return data, weight_bytes


def _net_weights(net_arch: Any) -> int:
    """The fewest weights a policy with these layer sizes has: per list of sizes, a bias
    per unit and a weight matrix per two consecutive layers (the input and output layers,
    which the env's spaces size, left out).  A list of lists or a mapping (``pi``, ``vf``,
    ``qf``) counts each of its lists."""
    if isinstance(net_arch, dict):
        return sum(_net_weights(v) for v in net_arch.values())
    if not isinstance(net_arch, list):
        return 0
    sizes = [max(v, 0) for v in net_arch if isinstance(v, int) and not isinstance(v, bool)]
    return (sum(sizes) + sum(a * b for a, b in zip(sizes, sizes[1:]))
            + sum(_net_weights(v) for v in net_arch if isinstance(v, (dict, list))))


def _check_net_arch(data: dict, weight_bytes: int | None, path: str, label: str) -> None:
    """Refuse, before SB3 builds (and initialises) the policy, layer sizes that need more
    weights than the file holds: a 20 KB zip asking for ``net_arch=[20000, 20000]`` had the
    loader allocate and orthogonalise 400M weights (8 GB, minutes) before it found that the
    weights do not fit."""
    pk = data.get("policy_kwargs")
    need = _net_weights(pk.get("net_arch")) if isinstance(pk, dict) else 0
    have = (weight_bytes or 0) // MIN_BYTES_PER_WEIGHT
    if need > have:
        held = "it has no policy.pth" if weight_bytes is None else f"its policy.pth holds at most {have:,}"
        raise ConfigError(label, path, f"a model whose policy_kwargs.net_arch fits its weights (its layer sizes "
                                       f"need at least {need:,} weights; {held})")


def _pickled(item: Any) -> bool:
    return isinstance(item, dict) and ":serialized:" in item


def _custom_objects(data: dict, algo_cls, env, path: str, label: str) -> dict:
    """Every pickled field of ``data`` replaced (SB3 then does not unpickle it), and the
    training-only sizes set to 1."""
    def refuse(what: str):
        raise ConfigError(label, path, f"a model kenv can check without unpickling ({what}), {TRUST}")

    if not all(_space_fits(data.get(k), s) for k, s in (("observation_space", env.observation_space),
                                                        ("action_space", env.action_space))):
        raise misfit(env, label, path, _readable_space(data.get("observation_space")),
                     _readable_space(data.get("action_space")))
    custom: dict[str, Any] = {"n_envs": 1, "n_steps": 1, "buffer_size": 1, "batch_size": 1}
    for key, item in data.items():
        if key in custom or not _pickled(item):
            continue
        if key in TRAINING_STATE:
            custom[key] = None
        elif key in ("observation_space", "action_space"):
            custom[key] = getattr(env, key)   # (checked above against the readable type and shape)
        elif key == "policy_class":
            mlp = algo_cls.policy_aliases["MlpPolicy"]
            if item.get("__module__") != mlp.__module__:
                refuse(f"policy_class from {item.get('__module__')!r}, not {algo_cls.__name__}'s MlpPolicy")
            custom[key] = mlp
        elif key == "policy_kwargs":
            custom[key] = {k: _readable_value(v, f"policy_kwargs.{k}", refuse)
                           for k, v in item.items() if not k.startswith(":")}
        elif key in ("learning_rate", "clip_range"):   # schedules: acting reads neither
            custom[key] = 0.0
        elif key == "train_freq":
            custom[key] = 1
        else:
            refuse(f"the pickled field {key!r}")
    return custom


def _space_fits(item: Any, space) -> bool:
    """The readable type and shape SB3 writes beside a pickled space are ``space``'s."""
    if not _pickled(item) or item.get(":type:") != str(type(space)):
        return False
    if list(item.get("_shape") or ()) != list(space.shape or ()):
        return False
    return "n" not in item or getattr(space, "n", None) is None or str(item["n"]) == str(int(space.n))


def _readable_space(item: Any) -> str:
    """A space as :func:`describe_space` writes it, from SB3's readable fields."""
    if not _pickled(item):
        return "none"
    m = re.search(r"\.(\w+)'>", str(item.get(":type:")))
    name = m.group(1) if m else "?"
    if name == "Discrete":
        return f"Discrete({item.get('n')})"
    if name == "Box":
        return f"Box{tuple(item.get('_shape') or ())}"
    return f"{name}{tuple(item.get('_shape') or ())}"


def describe_space(space) -> str:
    """A one-line description of a space (Box: its shape only)."""
    if type(space).__name__ == "Box":
        return f"Box{space.shape}"
    return str(space).replace("\n", " ")


def misfit(env, label: str, path: str, model_obs: str, model_act: str) -> ConfigError:
    """The error for a model trained on spaces other than ``env``'s."""
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    return ConfigError(label, path, f"a model trained on {env_id} with these arguments: observation "
                                    f"{describe_space(env.observation_space)}, action "
                                    f"{describe_space(env.action_space)} (this model: observation {model_obs}, "
                                    f"action {model_act})")


def _readable_value(value: Any, name: str, refuse) -> Any:
    """A policy_kwargs entry from its readable form: JSON as is; a class only from
    :data:`CLASS_MODULES`; anything else SB3 wrote as ``str()`` is refused."""
    if not isinstance(value, str) or not value.startswith("<"):
        return value
    m = _CLASS.match(value)
    if m is not None:
        cls = _allowed_class(m.group(1))
        if cls is not None:
            return cls
    refuse(f"{name} = {value[:80]}")


def _allowed_class(dotted: str):
    module, _, name = dotted.rpartition(".")
    if not any(module == m or module.startswith(m + ".") for m in CLASS_MODULES):
        return None
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return obj if inspect.isclass(obj) else None


def zip_algo_hint(path: str) -> list[str]:
    """Algorithms (``ppo``, ``a2c``, ``dqn``) to try for a zip with no run.yaml beside it,
    most likely first, from the readable module of its policy class (no unpickling)."""
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("data")
            text = z.read(info).decode("utf-8") if info.file_size <= MAX_DATA_BYTES else ""
        module = (json.loads(text).get("policy_class") or {}).get("__module__", "")
    except Exception:  # noqa: BLE001 - no hint: try all
        module = ""
    return ["dqn", "ppo", "a2c"] if "dqn" in str(module) else ["ppo", "a2c", "dqn"]


__all__ = ["load_model", "zip_algo_hint", "TRUST"]


#: the entry kenv adds to the zips it saves (:func:`with_action_names`): the names of the
#: actions the model's indices stand for (SB3's load reads only ``data``, ``*.pth`` and
#: its version entries, and skips it)
ACTIONS_ENTRY = "kenv_actions.json"
#: the largest ``kenv_actions.json`` read (bytes; a kenv action set is under 1 KB)
MAX_ACTIONS_BYTES = 100_000


def action_names_of(model) -> list | None:
    """The action names of the kenv env a model trains on (its ``actions``: a tuple of
    names, or one per decision), or None (no env, or not a kenv env)."""
    venv = model.get_env()
    if venv is None:
        return None
    try:
        names = venv.get_attr("actions", [0])[0]
    except AttributeError:
        return None
    return json.loads(json.dumps(names))   # (lists: as they read back)


def with_action_names(zip_bytes: bytes, names: list) -> bytes:
    """An SB3 zip with :data:`ACTIONS_ENTRY` added: a model moved out of its run directory
    still says which actions its indices mean (a reordered action set has the same spaces)."""
    import io

    buf = io.BytesIO(zip_bytes)
    with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(ACTIONS_ENTRY, json.dumps({"actions": names}))
    return buf.getvalue()


def read_action_names(path: str) -> list | None:
    """The action names a kenv-saved zip carries (:data:`ACTIONS_ENTRY`), or None (a zip
    saved by SB3 itself, or before kenv added the entry; an unreadable entry counts as none:
    the load that follows says what is wrong with the file)."""
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo(ACTIONS_ENTRY)
            if info.file_size > MAX_ACTIONS_BYTES:
                return None
            doc = json.loads(z.read(info).decode("utf-8"))
    except (KeyError, OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError, RecursionError):
        return None
    names = doc.get("actions") if isinstance(doc, dict) else None
    if not (isinstance(names, list) and names and (
            all(isinstance(n, str) for n in names)
            or all(isinstance(d, list) and d and all(isinstance(n, str) for n in d) for d in names))):
        return None
    return names

