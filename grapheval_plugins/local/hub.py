"""The model hub as a last resort (never with ``HF_HUB_OFFLINE`` / ``GRAPHEVAL_NO_HUB``): one TCP reachability
probe (:func:`probe_hub`), then one download attempt, never a retry loop.

>>> probe_hub(connect=lambda address, timeout: (_ for _ in ()).throw(OSError("no route")), env={}).reachable
False
>>> probe_hub(env={"HF_HUB_OFFLINE": "1"}).detail
'skipped: HF_HUB_OFFLINE / GRAPHEVAL_NO_HUB set'
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

__all__ = ["HubProbe", "default_hub_fetch", "hub_enabled", "probe_hub"]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0  # seconds for the TCP connection
DOWNLOAD_ETAG_TIMEOUT_S = 5.0  # seconds for the metadata request of a download


def hub_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``HF_HUB_OFFLINE`` or ``GRAPHEVAL_NO_HUB`` is set to a true value."""
    environ = os.environ if env is None else env
    flag = environ.get("HF_HUB_OFFLINE", "") or environ.get("GRAPHEVAL_NO_HUB", "")
    return flag.strip().lower() not in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class HubProbe:
    """The result of :func:`probe_hub`: ``reachable``, and a one-line ``detail``."""

    reachable: bool
    detail: str


def probe_hub(*, timeout: float = PROBE_TIMEOUT_S, connect: Callable[..., Any] = socket.create_connection,
        env: Mapping[str, str] | None = None) -> HubProbe:
    """One TCP connection attempt to the hub endpoint (no HTTP, no retries); ``connect`` is injectable for tests."""
    if not hub_enabled(env):
        return HubProbe(False, "skipped: HF_HUB_OFFLINE / GRAPHEVAL_NO_HUB set")
    try:
        from huggingface_hub import constants
    except ImportError:
        return HubProbe(False, "skipped: huggingface_hub is not installed")
    endpoint = (os.environ if env is None else env).get("HF_ENDPOINT") or str(constants.ENDPOINT)
    parsed = urlparse(endpoint)
    if not parsed.hostname:
        return HubProbe(False, f"unusable hub endpoint {endpoint!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        conn = connect((parsed.hostname, port), timeout=timeout)
    except (OSError, ValueError) as exc:
        return HubProbe(False, f"{endpoint} unreachable ({type(exc).__name__}: {exc})")
    close = getattr(conn, "close", None)
    if callable(close):
        close()
    return HubProbe(True, f"{endpoint} reachable")


def default_hub_fetch(repo_id: str, filename: str | None, local_only: bool) -> Path:
    """Fetch ``filename`` (or the repository's Q4_K_M GGUF) with ``huggingface_hub``, once the probe reached it;
    ``local_only``: its cache only. Raises on any failure (``ImportError`` without ``huggingface_hub``)."""
    import huggingface_hub as hub  # imported lazily; absent -> ImportError, caught by the caller

    if local_only:
        if filename is None:
            raise FileNotFoundError("no file name given for a local-only hub lookup")
        found = hub.try_to_load_from_cache(repo_id, filename)
        if isinstance(found, str) and os.path.isfile(found):
            return Path(found)
        raise FileNotFoundError(f"{repo_id}/{filename} is not in the hub cache")
    probe = probe_hub()
    if not probe.reachable:
        raise ConnectionError(probe.detail)
    if filename is None:
        files = [f for f in hub.list_repo_files(repo_id) if f.lower().endswith(".gguf")]
        if not files:
            raise FileNotFoundError(f"no .gguf file in {repo_id}")
        preferred = [f for f in files if "q4_k_m" in f.lower()]
        filename = sorted(preferred or files)[0]
    return Path(hub.hf_hub_download(repo_id, filename, etag_timeout=DOWNLOAD_ETAG_TIMEOUT_S))
