"""The provider protocols over HTTP on 127.0.0.1, reached through the client stacks users run.

Emulators (``protocol_servers.py``) answer Bedrock Converse and Anthropic Messages requests from a script, in a
thread of this process; llama-cpp-python's own OpenAI-compatible server runs the real 0.5B GGUF in a subprocess
(``test_openai_compatible.py``, marked ``integration``). Every server binds 127.0.0.1 on a free port and is stopped
by its fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from protocol_servers import AnthropicMessagesServer, BedrockConverseServer

PAPER_MODEL = "anthropic.claude-v2"
"""The paper's Bedrock model id (``bedrock:anthropic.claude-v2`` in the docs and the CLI)."""


@pytest.fixture(autouse=True)
def _fresh_shared_models() -> Iterator[None]:
    """Scorers built from specs are shared per process; each test's server has its own port, so none is kept."""
    from grapheval_plugins import registry

    registry.clear_shared()
    yield
    registry.clear_shared()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials and a region, and no AWS configuration of the machine's user."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def bedrock(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[BedrockConverseServer]:
    """A Bedrock Converse emulator; boto3 reaches it through ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, so a plain
    ``bedrock:<model id>`` spec (and the CLI's ``--llm``) talks to it."""
    with BedrockConverseServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        yield server


@pytest.fixture
def quick_botocore_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's backoff between its own attempts cut to 10 ms (its attempts and their number unchanged), so a
    fault that outlasts all eight attempts costs milliseconds, not half a minute."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.01)


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicMessagesServer]:
    """An Anthropic Messages emulator."""
    with AnthropicMessagesServer() as server:
        yield server
