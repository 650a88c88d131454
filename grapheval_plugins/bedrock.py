"""Amazon Bedrock chat models through the Converse API (``aws`` extra), as docs/guides/bedrock.md describes: what
the spec ``"bedrock:<model id>"`` resolves to. No network is touched to build one:

>>> import os
>>> os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # doctest: +ELLIPSIS
'...'
>>> from unittest.mock import MagicMock
>>> client = MagicMock()
>>> client.converse.return_value = {
...     "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
...     "stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}
>>> llm = chat_bedrock("anthropic.claude-v2", sampling=PAPER_SAMPLING, client=client, bedrock_client=MagicMock())
>>> llm.invoke("hi").content
'ok'
>>> request = client.converse.call_args.kwargs
>>> request["inferenceConfig"], request["additionalModelRequestFields"]
({'maxTokens': 2048, 'temperature': 1.0, 'topP': 1.0}, {'top_k': 250})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from ._imports import require
from .exceptions import InputError, ModelLoadError

if TYPE_CHECKING:  # pragma: no cover
    from langchain_aws import ChatBedrockConverse

__all__ = ["DEFAULT_MAX_ATTEMPTS", "DEFAULT_MAX_TOKENS", "PAPER_SAMPLING", "REPEATABLE_SAMPLING", "Sampling",
    "chat_bedrock", "top_k_request_fields"]

DEFAULT_MAX_TOKENS = 2048
"""Room for a long list of triples, within every Bedrock text model's output limit."""

DEFAULT_MAX_ATTEMPTS = 8
"""botocore attempts per call (first try included) when throttled or on transient errors."""

# Where each Bedrock model provider takes top-k in a Converse request (``additionalModelRequestFields``).
_TOP_K_FIELD: dict[str, str] = {"anthropic": "top_k", "mistral": "top_k", "cohere": "k"}
_GEO_PREFIXES = frozenset({"eu", "us", "us-gov", "apac", "sa", "amer", "global", "jp", "au", "ca"})


@dataclass(frozen=True)
class Sampling:
    """Sampling settings for a Bedrock chat model (``None``: the model's default; ``top_k``: docs/guides/bedrock.md).

    >>> Sampling(temperature=0.0).as_dict()
    {'temperature': 0.0}
    """

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0.0 <= self.temperature <= 1.0:
            raise InputError("temperature", f"must be in [0, 1], got {self.temperature!r}")
        if self.top_p is not None and not 0.0 <= self.top_p <= 1.0:
            raise InputError("top_p", f"must be in [0, 1], got {self.top_p!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise InputError("top_k", f"must be a positive integer, got {self.top_k!r}")

    def as_dict(self) -> dict[str, float | int]:
        return {k: v for k, v in vars(self).items() if v is not None}


PAPER_SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=250)
"""The paper's settings for Claude 2 (newer Claude models: docs/guides/bedrock.md, "Sampling")."""

REPEATABLE_SAMPLING = Sampling(temperature=0.0)
"""The default of :func:`chat_bedrock`: greedy decoding, so the same output gives the same knowledge graph."""


def _provider(model_id: str) -> str:
    parts = model_id.split(".", maxsplit=2)
    if len(parts) > 1 and parts[0].lower() in _GEO_PREFIXES:
        return parts[1].lower()
    return parts[0].lower()


def top_k_request_fields(model_id: str, top_k: int, provider: str | None = None) -> dict[str, Any]:
    """The ``additionalModelRequestFields`` entry that sets top-k for this model's provider (``InputError``: none).

    >>> top_k_request_fields("anthropic.claude-v2", 250)
    {'top_k': 250}
    >>> top_k_request_fields("us.amazon.nova-lite-v1:0", 50)
    {'inferenceConfig': {'topK': 50}}
    """
    name = (provider or _provider(model_id)).lower()
    if name == "amazon" and "nova" in model_id.lower():
        return {"inferenceConfig": {"topK": top_k}}
    if name in _TOP_K_FIELD:
        return {_TOP_K_FIELD[name]: top_k}
    raise InputError(
        "top_k",
        f"no known top-k parameter for Bedrock provider {name!r} (model {model_id!r}); leave top_k unset or pass "
        "additional_model_request_fields yourself",
    )


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _as_sampling(sampling: Sampling | Mapping[str, Any] | str | None) -> Sampling:
    if sampling is None:
        return REPEATABLE_SAMPLING
    if isinstance(sampling, Sampling):
        return sampling
    if isinstance(sampling, str):
        presets = {"paper": PAPER_SAMPLING, "repeatable": REPEATABLE_SAMPLING, "default": Sampling()}
        if sampling.lower() not in presets:
            raise InputError("sampling", f"unknown preset {sampling!r}; use one of {sorted(presets)}")
        return presets[sampling.lower()]
    if isinstance(sampling, Mapping):
        unknown = set(sampling) - {"temperature", "top_p", "top_k"}
        if unknown:
            raise InputError("sampling", f"unknown settings {sorted(unknown)}; use temperature, top_p, top_k")
        return Sampling(**sampling)
    raise InputError("sampling", f"expected a Sampling, a mapping or a preset name, got {type(sampling).__name__}", reason="type")


def chat_bedrock(
    model_id: str,
    *,
    sampling: Sampling | Mapping[str, Any] | str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    region_name: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry_mode: Literal["adaptive", "standard", "legacy"] = "adaptive",
    client: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> ChatBedrockConverse:
    """A ``ChatBedrockConverse`` chat model for ``model_id`` (a Bedrock model id, inference profile or ARN).

    Args:
        sampling: a :class:`Sampling`, a mapping of its fields, or a preset: ``"paper"`` (:data:`PAPER_SAMPLING`),
            ``"repeatable"`` (:data:`REPEATABLE_SAMPLING`, the default), ``"default"`` (the model's own).
        temperature, top_p, top_k: override single settings of ``sampling``.
        max_attempts, retry_mode: botocore's retries of the client created here (not of a ``client`` you pass,
            nor when your ``config`` sets ``retries``).
        **kwargs: passed to ``ChatBedrockConverse`` (``credentials_profile_name``, ``endpoint_url`` …).
    """
    if not isinstance(model_id, str) or not model_id.strip():
        raise InputError("model_id", "must name a Bedrock model, e.g. 'anthropic.claude-v2'")
    if max_attempts < 1:
        raise InputError("max_attempts", f"must be >= 1, got {max_attempts!r}")
    model_id = model_id.strip()
    aws = require("langchain_aws", "aws", "Amazon Bedrock chat models", package="langchain-aws")
    require("boto3", "aws", "Amazon Bedrock chat models")
    from botocore.config import Config

    overrides: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "top_k": top_k}
    settings = replace(_as_sampling(sampling), **{k: v for k, v in overrides.items() if v is not None})

    fields: dict[str, Any] = dict(kwargs.pop("additional_model_request_fields", None) or {})
    if settings.top_k is not None:
        fields = _merge(top_k_request_fields(model_id, settings.top_k, kwargs.get("provider")), fields)

    if client is None:
        retry_config = Config(retries={"mode": retry_mode, "total_max_attempts": max_attempts})
        config = retry_config if config is None else retry_config.merge(config)
    params: dict[str, Any] = {
        "model": model_id, "temperature": settings.temperature, "top_p": settings.top_p, "max_tokens": max_tokens,
        "region_name": region_name, "client": client, "config": config,
        "additional_model_request_fields": fields or None, **kwargs,
    }
    params = {k: v for k, v in params.items() if v is not None}
    try:
        return cast("ChatBedrockConverse", aws.ChatBedrockConverse(**params))
    except Exception as exc:  # noqa: BLE001 - botocore / pydantic errors, translated with their cause
        hint = ""
        if type(exc).__name__ == "NoRegionError" or "region" in str(exc).lower():
            hint = " Set region_name=... or the AWS_REGION environment variable."
        raise ModelLoadError(f"could not create a Bedrock chat model for {model_id!r}: {exc}.{hint}") from exc
