"""Hub I/O of the HuggingFace scorers: hub settings, local-or-hub names, config and weight files, load errors."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import ModelLoadError
from ._runtime import _torch, _transformers

__all__ = ["PINNED_REVISIONS", "HubOptions", "find_weights", "load_error", "looks_like_path",
    "pinned_revision", "read_config_dict", "read_state_dict"]

PINNED_REVISIONS: dict[str, str] = {
    "vectara/hallucination_evaluation_model": "8e4a2e6e96c708cc76c2344f7e4757df2515292c",
    "google/flan-t5-base": "7bcac572ce56db69c1ea7c8af255c5d7c9672fc2",
    "google/t5_xxl_true_nli_mixture": "aa6cfe1dd4257853bfdd772992045f41bfc14988",
    "lytang/MiniCheck-Flan-T5-Large": "96eafd01cee2d16cf81aaa2fb226b14f422a37b3",
    "lytang/MiniCheck-RoBERTa-Large": "74c8919647e61ed0f71bc177d94f10930f090068",
    "lytang/MiniCheck-DeBERTa-v3-Large": "2f2d01a54fa022a7ffadb76260e1ea8bc88c82bb",
}
"""The commit each built-in hub model loads by default (config, weights, tokenizer); ``revision=`` or a spec's
``@<revision>`` (``@main``: the latest) overrides it. TrueTeacher has none yet and loads the latest."""

_PINNED_LOWER = {name.lower(): commit for name, commit in PINNED_REVISIONS.items()}


def pinned_revision(name: str) -> str | None:
    """The commit a built-in hub model is pinned to, or ``None``.

    >>> pinned_revision("lytang/MiniCheck-RoBERTa-Large")
    '74c8919647e61ed0f71bc177d94f10930f090068'
    >>> pinned_revision("cross-encoder/nli-deberta-v3-base") is None
    True
    """
    return _PINNED_LOWER.get(name.strip().lower())

# Exception class names, anywhere in a cause chain, that mean "not cached and the hub cannot be reached".
_OFFLINE_ERRORS = {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectionError", "ConnectError",
                   "ConnectTimeout", "SocketBlockedError", "NameResolutionError", "MaxRetryError"}


@dataclass(frozen=True)
class HubOptions:
    """The hub settings passed alike to config, weights and tokenizer of one model."""

    revision: str | None = None
    local_files_only: bool | None = None
    token: str | bool | None = field(default=None, repr=False)
    cache_dir: str | os.PathLike[str] | None = None

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``from_pretrained`` / ``cached_file``.

        >>> HubOptions(revision="abc", local_files_only=True).kwargs()
        {'revision': 'abc', 'local_files_only': True}
        """
        kw = {"revision": self.revision, "local_files_only": self.local_files_only,
              "token": self.token, "cache_dir": None if self.cache_dir is None else os.fspath(self.cache_dir)}
        return {key: value for key, value in kw.items() if value is not None}


def looks_like_path(name: str) -> bool:
    """True when ``name`` means a local folder rather than a hub repository id.

    >>> looks_like_path("org/model"), looks_like_path("./model"), looks_like_path("/abs/model")
    (False, True, True)
    """
    return (
        os.path.isabs(name)
        or name.startswith(("./", "../", "~", ".\\", "..\\"))
        or name in {".", ".."}
        or name.count("/") > 1
        or Path(name).expanduser().exists()
    )


def _cause_names(exc: BaseException) -> set[str]:
    names: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names.add(type(current).__name__)
        current = current.__cause__ or current.__context__
    return names


def load_error(what: str, name: str, hub: HubOptions, exc: BaseException) -> ModelLoadError:
    """A :class:`ModelLoadError` that says what to do, for a failure to load ``name``."""
    if looks_like_path(name) and not Path(name).expanduser().exists():
        return ModelLoadError(f"{what} {name!r}: no such folder. Pass the path of a folder holding the model files.")
    offline_env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    text = str(exc).lower()
    offline = (
        bool(_cause_names(exc) & _OFFLINE_ERRORS)
        or "couldn't connect" in text
        or "offline" in text
        or (not looks_like_path(name) and (hub.local_files_only or offline_env) and isinstance(exc, OSError))
    )
    revision = f" (revision {hub.revision})" if hub.revision else ""
    if offline and not looks_like_path(name):
        return ModelLoadError(
            f"{what} {name!r}{revision} is not in the local Hugging Face cache, and the hub cannot be reached "
            "from here (offline, no network, or local_files_only). Either download it once on a machine with hub "
            f"access (`hf download {name}`) and point HF_HOME or cache_dir= at that cache, or save the model "
            "files (config.json, weights, tokenizer) to a folder and pass its path instead of the hub name. "
            f"Cause: {exc}"
        )
    return ModelLoadError(f"could not load {what} {name!r}{revision}: {exc}")


def read_config_dict(name: str, hub: HubOptions) -> dict[str, Any]:
    """The model's ``config.json`` as a dict, without instantiating (or trusting) any model class."""
    if looks_like_path(name):
        path = Path(name).expanduser() / "config.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise load_error("the config of model", name, hub, exc) from exc
    transformers = _transformers()
    try:
        config_dict, _ = transformers.PretrainedConfig.get_config_dict(name, **hub.kwargs())
    except Exception as exc:  # noqa: BLE001 - hub / IO errors translated with their cause
        raise load_error("the config of model", name, hub, exc) from exc
    return dict(config_dict)


def find_weights(name: str, hub: HubOptions) -> list[str]:
    """Local paths of the checkpoint files of ``name`` (safetensors preferred; sharded checkpoints supported)."""
    from transformers.utils.hub import cached_file, get_checkpoint_shard_files

    def fetch(filename: str) -> str | None:
        return cached_file(name, filename, _raise_exceptions_for_missing_entries=False, **hub.kwargs())

    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if path := fetch(single):
            return [path]
        if index_path := fetch(index):
            shards, _ = get_checkpoint_shard_files(name, index_path, **hub.kwargs())  # type: ignore[no-untyped-call]
            return list(shards)
    raise ModelLoadError(f"model {name!r} has no weights (model.safetensors or pytorch_model.bin)")


def read_state_dict(paths: Sequence[str]) -> dict[str, Any]:
    """Tensors of the checkpoint files, on cpu. ``.bin`` files load with ``weights_only=True`` (no pickled code)."""
    torch = _torch()
    state: dict[str, Any] = {}
    for path in paths:
        if path.endswith(".safetensors"):
            from safetensors.torch import load_file

            state.update(load_file(path, device="cpu"))
        else:
            state.update(torch.load(path, map_location="cpu", weights_only=True))
    return state
