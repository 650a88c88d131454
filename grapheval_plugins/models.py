"""One door for model names: chat models (:func:`resolve_llm`) and scorers (:func:`resolve_scorer`) from objects
or specs (the specs: ``docs/scorers.md``); :func:`scorer_for` is the one rule for the default scorer.

Chat models: ``None`` (:data:`DEFAULT_LLM`), a LangChain chat model, ``"local:<name or .gguf path>"``,
``"bedrock:<model id>"``, ``"<provider>:<model>"`` (``init_chat_model``, needs ``langchain``) or
``"py:package.module:factory"``.
"""

from __future__ import annotations

import importlib
import re
import threading
from pathlib import Path
from typing import Any

from .check.base import Scorer
from .exceptions import ModelLoadError

__all__ = ["DEFAULT_LLM", "DEFAULT_SCORER", "SCORER_ALIASES", "load_judge", "resolve_llm", "resolve_scorer",
    "scorer_for", "scorer_key", "shared_scorer", "split_revision"]

DEFAULT_LLM = "local:qwen2.5-coder-1.5b"

DEFAULT_SCORER = "judge:local:qwen2.5-coder-1.5b"

SCORER_ALIASES: dict[str, str] = {
    "hhem": "hhem:vectara/hallucination_evaluation_model",
    "hhem-2.1-open": "hhem:vectara/hallucination_evaluation_model",
    "vectara/hallucination_evaluation_model": "hhem:vectara/hallucination_evaluation_model",
    "true": "t5:google/t5_xxl_true_nli_mixture",
    "google/t5_xxl_true_nli_mixture": "t5:google/t5_xxl_true_nli_mixture",
    "trueteacher": "t5:google/t5_11b_trueteacher_and_anli",
    "google/t5_11b_trueteacher_and_anli": "t5:google/t5_11b_trueteacher_and_anli",
    "minicheck": "minicheck:flan-t5-large",
    "judge": DEFAULT_SCORER,
    "local-judge": DEFAULT_SCORER,
}

# spec prefix -> "module:callable"; each callable takes the rest of the spec (and keyword options).
_LLM_FACTORIES: dict[str, str] = {
    "local": "grapheval_plugins.local.chat:load_local_chat_model",
    "bedrock": "grapheval_plugins.bedrock:chat_bedrock",
}
_SCORER_FACTORIES: dict[str, str] = {
    "hhem": "grapheval_plugins.check.hf:HHEMScorer",
    "t5": "grapheval_plugins.check.hf:T5NLIScorer",
    "nli": "grapheval_plugins.check.hf:CrossEncoderNLIScorer",
    "hf": "grapheval_plugins.check.hf:load_hf_scorer",
    "minicheck": "grapheval_plugins.check.minicheck:load_minicheck",
    "judge": "grapheval_plugins.models:load_judge",
}


def scorer_for(llm: Any = None, scorer: Any = None) -> Any:
    """The scorer an engine over ``llm`` uses (the one place the default is chosen): ``scorer``; else a judge over
    ``llm`` itself (``"judge:<spec>"``, the object, or its ``for_judging()`` form); else :data:`DEFAULT_SCORER`.

    >>> scorer_for(None), scorer_for("openai:gpt-4o-mini"), scorer_for("openai:gpt-4o-mini", "hhem")
    ('judge:local:qwen2.5-coder-1.5b', 'judge:openai:gpt-4o-mini', 'hhem')
    """
    if scorer is not None:
        return scorer
    if llm is None:
        return DEFAULT_SCORER
    if isinstance(llm, str):
        return f"judge:{llm.strip()}"
    for_judging = getattr(llm, "for_judging", None)  # a fixed-schema model (Instructor), a local llama.cpp model
    return for_judging() if callable(for_judging) else llm


SCORERS: dict[str, Scorer] = {}
"""The process-wide scorers of :func:`shared_scorer`, by :func:`scorer_key`."""
_SCORER_LOCKS: dict[str, threading.Lock] = {}
_LOCK = threading.Lock()


def scorer_key(spec: str | None) -> str:
    """The canonical form of a scorer spec: ``None`` is the default, aliases name their model.

    >>> scorer_key("HHEM") == scorer_key("hhem:vectara/hallucination_evaluation_model")
    True
    """
    text = (spec or DEFAULT_SCORER).strip()
    text = SCORER_ALIASES.get(text.lower(), text)
    prefix, sep, rest = text.partition(":")
    return f"{prefix.lower()}:{rest}" if sep else text


def shared_scorer(spec: Any = None) -> Scorer:
    """The process-wide scorer for ``spec`` (a scorer object as it is): resolved once per canonical spec
    (:func:`scorer_key`); loads of different specs may run at once."""
    if spec is not None and not isinstance(spec, str):
        return resolve_scorer(spec)
    key = scorer_key(spec)
    with _LOCK:
        lock = _SCORER_LOCKS.setdefault(key, threading.Lock())
    with lock:  # one load per spec; other specs are not held up
        scorer = SCORERS.get(key)
        if scorer is None:
            scorer = SCORERS[key] = resolve_scorer(spec)
        return scorer


def load_judge(spec: str, **options: Any) -> Scorer:
    """The factory behind ``judge:`` specs: the llama.cpp judge for ``local:`` or a bare name, else an
    :class:`~grapheval_plugins.check.llm_judge.LLMJudge` over ``resolve_llm(spec)``.

    >>> load_judge("py:grapheval_plugins.testing:ScriptedChatModel").name
    'judge:scripted'
    """
    prefix, _ = _split(spec.strip())
    if prefix in ("", "local") or len(prefix) == 1:  # a bare name, or a Windows drive letter
        from .local.judge import load_judge_scorer

        return load_judge_scorer(spec, **options)
    from .check.llm_judge import LLMJudge

    return LLMJudge(resolve_llm(spec.strip()), **options)


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _made(factories: dict[str, str], prefix: str, rest: str, spec: str, what: str, options: dict[str, Any]) -> Any:
    if prefix and not rest:
        raise ModelLoadError(f"{what} spec {spec!r} names no model after {prefix!r}:")
    return _load(factories[prefix])(rest, **options)


def _from_python(target: str, options: dict[str, Any]) -> Any:
    """``package.module:factory`` → ``factory(**options)`` (an importable name the caller chose; nothing is eval'd)."""
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ModelLoadError(f"'py:' specs take 'package.module:factory', got {target!r}")
    try:
        factory = _load(target)
    except (ImportError, AttributeError) as exc:
        raise ModelLoadError(f"cannot import {target!r}: {exc}") from exc
    return factory(**options) if callable(factory) else factory


_REVISIONED = {"hhem", "t5", "nli", "hf", "minicheck", ""}
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]*$")


def split_revision(name: str) -> tuple[str, str | None]:
    """``"name@revision"`` → ``("name", "revision")``; an existing path is left whole.

    >>> split_revision("vectara/hallucination_evaluation_model@8e4a2e6")
    ('vectara/hallucination_evaluation_model', '8e4a2e6')
    >>> split_revision("cross-encoder/nli-deberta-v3-base")
    ('cross-encoder/nli-deberta-v3-base', None)
    """
    base, sep, revision = name.rpartition("@")
    if not sep or not base or not _REVISION.match(revision) or Path(name).expanduser().exists():
        return name, None
    return base, revision


def _split(spec: str) -> tuple[str, str]:
    prefix, sep, rest = spec.partition(":")
    return (prefix.lower(), rest) if sep else ("", spec)


def resolve_llm(spec: Any = None, **options: Any) -> Any:
    """A LangChain chat model from an object or a spec (module docs); ``ModelLoadError`` or
    ``MissingDependencyError`` (naming the extra) when it cannot be made.

    >>> from grapheval_plugins.testing import ScriptedChatModel
    >>> llm = ScriptedChatModel(responses=["ok"])
    >>> resolve_llm(llm) is llm
    True
    """
    if spec is None:
        spec = DEFAULT_LLM
    if not isinstance(spec, str):
        if hasattr(spec, "ainvoke") and hasattr(spec, "invoke"):
            return spec
        raise ModelLoadError(f"cannot use {type(spec).__name__} as a chat model: pass a LangChain chat model or a spec")
    prefix, rest = _split(spec.strip())
    if prefix == "py":
        return resolve_llm(_from_python(rest, options))
    if prefix in _LLM_FACTORIES:
        return _made(_LLM_FACTORIES, prefix, rest, spec, "chat model", options)
    if prefix:
        try:
            from langchain.chat_models import init_chat_model
        except ImportError as exc:
            raise ModelLoadError(
                f"unknown chat model spec {spec!r}. Known prefixes: {sorted(_LLM_FACTORIES)}; other providers "
                "need the 'langchain' package (init_chat_model), or pass a chat model object."
            ) from exc
        try:
            return init_chat_model(spec, **options)
        except Exception as exc:  # noqa: BLE001 - translated with its cause
            raise ModelLoadError(f"could not create chat model {spec!r}: {exc}") from exc
    raise ModelLoadError(
        f"unknown chat model spec {spec!r}: use 'local:<name>', 'bedrock:<model id>', "
        "'<provider>:<model>', or pass a LangChain chat model"
    )


def resolve_scorer(spec: Any = None, **options: Any) -> Scorer:
    """A :class:`~grapheval_plugins.check.Scorer` from an object or a spec, as :func:`resolve_llm` does.

    >>> from grapheval_plugins.testing import KeywordScorer
    >>> s = KeywordScorer()
    >>> resolve_scorer(s) is s
    True
    """
    if spec is None:
        spec = DEFAULT_SCORER
    if isinstance(spec, Scorer):
        return spec
    if not isinstance(spec, str):
        from .check.llm_judge import LLMJudge, is_chat_model

        if is_chat_model(spec) or (hasattr(spec, "invoke") and hasattr(spec, "ainvoke")):
            return LLMJudge(spec, **options)
        raise ModelLoadError(
            f"cannot use {type(spec).__name__} as a scorer: pass a Scorer, a LangChain chat model or a spec string "
            "(a host's own model object goes to that host's adapter: GraphEvalMetric(scorer=...) takes a "
            "DeepEvalBaseLLM)"
        )
    spec = spec.strip()
    if _split(spec)[0] != "py":
        alias, revision = split_revision(spec)
        target = SCORER_ALIASES.get(alias.lower(), alias)
        if revision is not None and _split(target)[0] in _REVISIONED:
            if "revision" in options and options["revision"] != revision:
                raise ModelLoadError(f"scorer spec {spec!r} names revision {revision!r}, and revision= is "
                                     f"{options['revision']!r}: give one")
            options = {**options, "revision": revision}
            spec = alias
    spec = SCORER_ALIASES.get(spec.lower(), spec)
    prefix, rest = _split(spec)
    if prefix == "py":
        return resolve_scorer(_from_python(rest, options))
    if prefix in _SCORER_FACTORIES or not prefix:  # a bare hub name or path: its kind read from its config
        made = _made(_SCORER_FACTORIES, prefix or "hf", rest, spec, "scorer", options)
        if not isinstance(made, Scorer):
            raise ModelLoadError(f"the factory for scorer spec {spec!r} returned {type(made).__name__}, not a Scorer")
        return made
    raise ModelLoadError(
        f"unknown scorer spec {spec!r}: use one of {sorted(SCORER_ALIASES)} or a prefix of {sorted(_SCORER_FACTORIES)}"
    )
