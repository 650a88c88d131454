"""The one module that talks to llama-cpp-python: loading a model, a second context over it, next-token logits.

Everything version-dependent about llama-cpp-python lives here, behind checks that fail with a clear message:

* :func:`load_llama` validates the GGUF file in Python first (:mod:`~grapheval_plugins.local.gguf`: magic, header,
  tensor bounds, a ChatML chat template), then creates ``llama_cpp.Llama`` with llama.cpp's ``use_extra_bufts``
  model parameter set from :func:`~grapheval_plugins.local.cpu.decide_extra_buffers` (off by default: the AMX
  weight-repack path crashes on some CPUs). The parameter is a public field of ``llama_cpp.llama_model_params``;
  when ``Llama()`` does not take it as a keyword (0.3.x), a subclass sets it on the ``model_params`` structure
  that ``Llama`` builds and passes to the loader. If a future llama-cpp-python drops the field,
  :class:`~grapheval_plugins.exceptions.ModelLoadError` says so instead of silently repacking.
* :class:`SharedContext` opens a second llama.cpp context (its own KV cache) over an already loaded model, so the
  chat model and the judge share the weights in memory. It needs llama-cpp-python's private ``_internals``
  module; :func:`internals_supported` checks the version range it was written against, and outside it the
  caller loads the model a second time instead.
* :func:`next_logits` reads the logits of the last evaluated position; :func:`eval_logits` evaluates a few tokens
  in one batch and reads the logits of every one of them (prompt-lookup decoding verifies its drafts with it).
* :func:`set_threads` changes a context's thread counts between evaluations (``llama_set_n_threads``).
* :func:`save_sequence` / :func:`restore_sequence` copy the KV cells of the context's sequence out and back
  (``llama_state_seq_get_data`` / ``llama_state_seq_set_data``), so a session can return to a prefix it evaluated
  earlier without evaluating it again.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .._imports import require
from ..exceptions import ModelLoadError
from .gguf import GGUFInfo, check_chatml, read_gguf

__all__ = [
    "EXTRA_BUFTS_FIELD",
    "INTERNALS_RANGE",
    "SharedContext",
    "batch_logits_supported",
    "eval_logits",
    "internals_supported",
    "llama_cpp_version",
    "load_llama",
    "next_logits",
    "restore_sequence",
    "save_sequence",
    "set_threads",
    "validate_model_file",
]

logger = logging.getLogger(__name__)

EXTRA_BUFTS_FIELD = "use_extra_bufts"
"""The ``llama_model_params`` field that lets llama.cpp repack weights into extra (AMX / interleaved) buffers."""

INTERNALS_RANGE = ((0, 3, 9), (0, 4, 0))
"""llama-cpp-python versions ``[low, high)`` whose private ``_internals`` :class:`SharedContext` was written for."""


def llama_cpp_version() -> str | None:
    """The installed llama-cpp-python version (without importing it), or ``None``."""
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def internals_supported(version: str | None = None) -> bool:
    """Whether ``version`` (default: the installed one) is in :data:`INTERNALS_RANGE`.

    >>> internals_supported("0.3.36"), internals_supported("0.4.1")
    (True, False)
    """
    version = version if version is not None else llama_cpp_version()
    if version is None:
        return False
    low, high = INTERNALS_RANGE
    return low <= _version_tuple(version) < high


def validate_model_file(path: str | Path, *, require_chatml: bool = True) -> GGUFInfo:
    """Check ``path`` in Python before llama.cpp loads it (see :mod:`~grapheval_plugins.local.gguf`)."""
    info = read_gguf(path)
    if require_chatml:
        check_chatml(info)
    return info


@cache
def _llama_with_extra_bufts(base: type, enabled: bool) -> type:
    """A ``Llama`` subclass that sets ``use_extra_bufts`` on the model parameters ``Llama.__init__`` creates.

    ``Llama.__init__`` assigns ``self.model_params = llama_model_default_params()``, then fills in fields and
    passes that structure to the model loader; the property below intercepts the one assignment.
    """

    def _get(self: Any) -> Any:
        return self.__dict__["_grapheval_model_params"]

    def _set(self: Any, params: Any) -> None:
        setattr(params, EXTRA_BUFTS_FIELD, enabled)
        self.__dict__["_grapheval_model_params"] = params

    name = f"Llama{'With' if enabled else 'No'}ExtraBuffers"
    return type(name, (base,), {"model_params": property(_get, _set), "__module__": __name__})


def _llama_factory(llama_cpp: Any, extra_buffers: bool) -> tuple[Any, dict[str, Any]]:
    """The class to instantiate and extra keyword arguments that make llama.cpp honour ``extra_buffers``."""
    params_type = getattr(llama_cpp, "llama_model_params", None)
    fields = {f[0] for f in getattr(params_type, "_fields_", ())}
    version = getattr(llama_cpp, "__version__", "?")
    if EXTRA_BUFTS_FIELD not in fields:
        if extra_buffers:  # what llama.cpp does anyway
            return llama_cpp.Llama, {}
        raise ModelLoadError(
            f"llama-cpp-python {version} has no '{EXTRA_BUFTS_FIELD}' model parameter, so grapheval cannot keep "
            "llama.cpp from repacking the weights into extra buffer types (the AMX path crashes on some CPUs). "
            "Install a llama-cpp-python that has it (pip install 'llama-cpp-python>=0.3.9,<0.4'), or opt in to "
            "llama.cpp's default with GRAPHEVAL_LLAMA_EXTRA_BUFFERS=1 (or extra_buffers=True)."
        )
    try:
        accepts = EXTRA_BUFTS_FIELD in inspect.signature(llama_cpp.Llama.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented signature
        accepts = False
    if accepts:
        return llama_cpp.Llama, {EXTRA_BUFTS_FIELD: extra_buffers}
    return _llama_with_extra_bufts(llama_cpp.Llama, extra_buffers), {}


def load_llama(
    path: str | Path,
    *,
    n_ctx: int,
    n_threads: int,
    n_batch: int,
    seed: int,
    extra_buffers: bool = False,
    require_chatml: bool = True,
    verbose: bool = False,
) -> Any:
    """Validate ``path`` and load it as a ``llama_cpp.Llama`` with ``use_extra_bufts=extra_buffers``.

    Raises:
        MissingDependencyError: llama-cpp-python is not installed.
        ModelLoadError: the file is not a complete GGUF / not ChatML (:func:`validate_model_file`), llama.cpp
            refuses it, or the installed llama-cpp-python cannot honour ``extra_buffers``.
    """
    path = Path(path)
    llama_cpp = require("llama_cpp", "local", "local llama.cpp models", package="llama-cpp-python")
    validate_model_file(path, require_chatml=require_chatml)
    cls, extra = _llama_factory(llama_cpp, extra_buffers)
    try:
        llama = cls(
            model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, n_batch=n_batch,
            seed=seed, logits_all=False, verbose=verbose, **extra,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(f"llama.cpp could not load {path}: {exc}") from exc
    params = getattr(llama, "model_params", None)
    if params is not None and hasattr(params, EXTRA_BUFTS_FIELD) and bool(getattr(params, EXTRA_BUFTS_FIELD)) != extra_buffers:
        raise ModelLoadError(  # pragma: no cover - a llama-cpp-python that rebuilt its parameters
            f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} did not apply {EXTRA_BUFTS_FIELD}="
            f"{extra_buffers} when loading {path}"
        )
    return llama


def next_logits(llama: Any) -> Any:
    """A copy of the next-token logits after the last evaluated token (numpy float32 vector over the vocabulary)."""
    import numpy as np

    pointer = llama._ctx.get_logits_ith(-1)
    return np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).copy()


def set_threads(llama: Any, n_threads: int, n_threads_batch: int) -> bool:
    """Let the next evaluations of ``llama`` (a ``Llama`` or a :class:`SharedContext`) use ``n_threads`` threads
    for one-token steps and ``n_threads_batch`` for batches; ``False`` where this llama-cpp-python (or a test fake)
    has no ``llama_set_n_threads`` on the context."""
    setter = getattr(getattr(llama, "_ctx", None), "set_n_threads", None)
    if setter is None:
        return False
    setter(int(n_threads), int(n_threads_batch))
    return True


def _state_functions() -> tuple[Any, Any, Any] | None:
    try:
        from llama_cpp import llama_cpp
    except ImportError:
        return None
    names = ("llama_state_seq_get_size", "llama_state_seq_get_data", "llama_state_seq_set_data")
    found = tuple(getattr(llama_cpp, name, None) for name in names)
    return found if all(callable(f) for f in found) else None  # type: ignore[return-value]


def save_sequence(llama: Any) -> bytes | None:
    """The KV cells of sequence 0 of ``llama`` (a ``Llama`` or a :class:`SharedContext`): the evaluated tokens'
    keys and values, not their logits. ``None`` where this llama-cpp-python (or a test fake) cannot copy them."""
    import ctypes

    functions = _state_functions()
    ctx = getattr(getattr(llama, "_ctx", None), "ctx", None)
    if functions is None or ctx is None:
        return None
    get_size, get_data, _ = functions
    size = int(get_size(ctx, 0))
    if size <= 0:
        return None
    buffer = (ctypes.c_uint8 * size)()
    written = int(get_data(ctx, buffer, size, 0))
    if written <= 0 or written > size:
        return None
    return ctypes.string_at(buffer, written)  # one copy (slicing a ctypes array would build a list of ints)


def restore_sequence(llama: Any, data: bytes, tokens: Sequence[int]) -> bool:
    """Put KV cells saved by :func:`save_sequence` back into sequence 0 of ``llama`` (dropping what it holds) and
    mark ``tokens`` (the tokens they were saved after) as evaluated. The next evaluation must evaluate at least one
    token: the logits are not restored. ``False`` (``llama`` unchanged, or emptied when llama.cpp refused the
    data) where this llama-cpp-python cannot."""
    import ctypes

    functions = _state_functions()
    ctx = getattr(getattr(llama, "_ctx", None), "ctx", None)
    if functions is None or ctx is None or not data or len(tokens) > len(llama.input_ids):
        return False
    _, _, set_data = functions
    llama._ctx.kv_cache_seq_rm(-1, 0, -1)
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if int(set_data(ctx, buffer, len(data), 0)) != len(data):
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        llama.n_tokens = 0
        return False
    llama.input_ids[: len(tokens)] = list(tokens)
    llama.n_tokens = len(tokens)
    return True


def batch_logits_supported(llama: Any) -> bool:
    """Whether :func:`eval_logits` can evaluate a batch with every token's logits in one llama.cpp call on
    ``llama`` (a ``Llama`` or a :class:`SharedContext` of llama-cpp-python 0.3.x)."""
    ctx, batch = getattr(llama, "_ctx", None), getattr(llama, "_batch", None)
    return all(
        callable(getattr(obj, name, None))
        for obj, name in ((ctx, "decode"), (ctx, "kv_cache_seq_rm"), (ctx, "get_logits_ith"), (batch, "set_batch"))
    )


def eval_logits(llama: Any, tokens: Sequence[int]) -> Any:
    """Evaluate ``tokens`` after the first ``llama.n_tokens`` cached ones (stale KV cells past them are dropped)
    and return the logits after each of them: a ``(len(tokens), n_vocab)`` float32 array whose row ``i`` is the
    next-token distribution after ``tokens[i]``.

    One ``llama_decode`` call with an output requested for every token (``llama_get_logits_ith`` reads each), so
    it needs no ``logits_all`` context; the batch must fit ``n_batch``.

    Raises:
        ValueError: no tokens, more than ``n_batch``, or ``llama`` lacks the internals
            (:func:`batch_logits_supported`).
    """
    import numpy as np

    tokens = [int(t) for t in tokens]
    if not tokens:
        raise ValueError("eval_logits needs at least one token")
    if not batch_logits_supported(llama):
        raise ValueError("this llama-cpp-python has no batch with an output for every token")
    n_vocab = int(llama.n_vocab())
    if len(tokens) > int(llama.n_batch):
        raise ValueError(f"{len(tokens)} tokens do not fit one batch of {llama.n_batch}")
    ctx, n_past = llama._ctx, int(llama.n_tokens)
    ctx.kv_cache_seq_rm(-1, n_past, -1)
    llama._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    ctx.decode(llama._batch)
    llama.input_ids[n_past : n_past + len(tokens)] = tokens
    llama.n_tokens = n_past + len(tokens)
    out = np.empty((len(tokens), n_vocab), dtype=np.float32)
    for i in range(len(tokens)):
        out[i] = np.ctypeslib.as_array(ctx.get_logits_ith(i), shape=(n_vocab,))
    return out


class SharedContext:
    """A second llama.cpp context over the model of an existing ``llama_cpp.Llama``: its own KV cache, the same
    weights in memory. Implements the part of ``Llama``'s interface that the runtime uses.

    Raises:
        ModelLoadError: the installed llama-cpp-python is outside :data:`INTERNALS_RANGE` or lacks the internals
            (the caller then loads the model again instead).
    """

    def __init__(self, base: Any, *, n_ctx: int, n_batch: int, n_threads: int) -> None:
        version = llama_cpp_version()
        if not internals_supported(version):
            raise ModelLoadError(
                f"llama-cpp-python {version} is outside {INTERNALS_RANGE}: a second context over a loaded model "
                "is not supported"
            )
        import numpy as np

        try:
            from llama_cpp import _internals, llama_cpp

            template = getattr(base, "context_params", None)
            params = (
                type(template).from_buffer_copy(template) if template is not None
                else llama_cpp.llama_context_default_params()
            )  # the same settings as the base context (attention kernel, KV types …): identical numerics
            params.n_ctx = n_ctx
            params.n_batch = params.n_ubatch = min(n_ctx, n_batch)
            params.n_threads = params.n_threads_batch = n_threads
            self._ctx = _internals.LlamaContext(model=base._model, params=params, verbose=False)
            self._batch = _internals.LlamaBatch(n_tokens=params.n_batch, embd=0, n_seq_max=n_ctx, verbose=False)
        except (ImportError, AttributeError, TypeError) as exc:
            raise ModelLoadError(f"llama-cpp-python {version}: cannot open a second context ({exc})") from exc
        self._base = base  # keeps the model alive as long as this context
        self.n_batch = params.n_batch
        self._n_ctx = n_ctx
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0

    @property
    def metadata(self) -> dict[str, str]:
        return dict(getattr(self._base, "metadata", {}) or {})

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(self._base.tokenize(text, add_bos=add_bos, special=special))

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        return bytes(self._base.detokenize(tokens, special=special))

    def token_eos(self) -> int:
        return int(self._base.token_eos())

    def n_vocab(self) -> int:
        return int(self._base.n_vocab())

    def n_ctx(self) -> int:
        return self._n_ctx

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: Sequence[int]) -> None:
        """As ``Llama.eval`` (logits of the last token only): drop stale KV cells, decode in batches."""
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        for i in range(0, len(tokens), self.n_batch):
            batch = list(tokens[i : i + self.n_batch])
            self._batch.set_batch(batch=batch, n_past=self.n_tokens, logits_all=False)
            self._ctx.decode(self._batch)
            self.input_ids[self.n_tokens : self.n_tokens + len(batch)] = batch
            self.n_tokens += len(batch)
