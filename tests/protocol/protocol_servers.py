"""Small emulators of provider APIs on 127.0.0.1, answered by a deterministic script, with faults on demand.

* :class:`BedrockConverseServer`: Amazon Bedrock Runtime's Converse operation as botocore speaks it
  (``POST /model/{modelId}/converse``, JSON in and out, errors named by the ``x-amzn-ErrorType`` header with a
  ``{"message": ...}`` body).
* :class:`AnthropicMessagesServer`: Anthropic's Messages API (``POST /v1/messages``, content blocks, ``usage``
  ``input_tokens``/``output_tokens``, errors as ``{"type": "error", "error": {"type": ..., "message": ...}}``).

Both answer with :func:`scripted_answer`: prompt A (an ``<input>`` to turn into triples) gets one triple per
sentence; the chat judge's prompt (a context and numbered claims) gets ``<n>: supported`` for a claim whose content
words all occur in the context and ``<n>: unknown`` otherwise. So tests know every answer in advance.

A fault is queued with :meth:`EmulatorServer.fault`: ``kind`` for the next ``times`` requests whose prompt contains
``when`` (every request when empty). Every request is logged (:attr:`EmulatorServer.requests`) with its arrival
time, so tests measure what reached the server, not what the client thinks it sent.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from grapheval_plugins.testing import keyword_support

FAULTS = ("throttle", "invalid", "500", "503", "reset", "timeout", "truncated", "empty", "refusal", "blocks", "skip")
"""The faults an emulator can inject (see :meth:`EmulatorServer.fault`); ``skip``: the answer's last line left out
(a judge that answered all its claims but one)."""

_INPUT = re.compile(r"<input>(.*?)</input>", re.S)
_CLAIM = re.compile(r"^(\d+)\. (.*)$", re.M)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


def scripted_answer(system: str, user: str) -> str:
    """The emulators' deterministic answer to a prompt (see the module docs).

    >>> scripted_answer("", "Use the given format ... <input>The cat sat on the mat.</input>.")
    '<python>[["The cat", "sat", "on the mat"]]</python>'
    >>> scripted_answer("", "Context:\\nThe cat sat on the mat.\\n\\nClaims:\\n1. The cat sat on the mat\\n2. The dog barked\\n\\nAnswer")
    '1: supported\\n2: unknown'
    """
    found = _INPUT.findall(user)
    if found:
        triples = []
        for sentence in _SENTENCE.findall(found[-1]):
            words = sentence.strip().rstrip(".!?").split()
            if len(words) >= 4:
                triples.append([" ".join(words[:2]), words[2], " ".join(words[3:])])
        return "<python>" + json.dumps(triples) + "</python>"
    if "Claims:\n" in user and "Context:\n" in user:  # after the rubric, where a host model sends one text
        context, _, rest = user.split("Context:\n", 1)[1].partition("\n\nClaims:\n")
        claims = _CLAIM.findall(rest.split("\n\n")[0])
        return "\n".join(
            f"{n}: {'supported' if keyword_support(context, claim) == 1.0 else 'unknown'}" for n, claim in claims
        )
    return "OK."


@dataclass
class Fault:
    kind: str
    times: int
    when: str = ""
    seconds: float = 0.0


@dataclass
class Logged:
    """One request as the server saw it."""

    at: float
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    """Lower-case names."""
    prompt: str
    fault: str | None = None


def _text(content: Any) -> str:
    """The text of a Bedrock or Anthropic content field (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        self.server.emulator.handle(self, body)

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_truncated(self, payload: Any) -> None:
        """Headers announcing the whole body, half of it, then the connection closes."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def reset(self) -> None:
        """Close the connection with a TCP reset (SO_LINGER 0), no response."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    emulator: EmulatorServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout, reset) leaves a broken pipe behind: expected here


@dataclass
class EmulatorServer:
    """A provider emulator on 127.0.0.1 in a thread: :meth:`start`, then :meth:`stop` (a context manager too)."""

    timeout_s: float = 5.0
    """How long a ``timeout`` fault holds the answer back (longer than the client's read timeout)."""
    requests: list[Logged] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: _HTTPServer | None = None
    _thread: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> EmulatorServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.emulator = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # ---------------------------------------------------------------- faults and log
    def fault(self, kind: str, times: int = 1, when: str = "", seconds: float = 1.0) -> None:
        """Answer the next ``times`` requests whose prompt contains ``when`` with fault ``kind`` (:data:`FAULTS`);
        ``seconds``: the ``Retry-After`` of a throttle."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            self.faults.append(Fault(kind, times, when, seconds))

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.requests.clear()

    def _take_fault(self, prompt: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and fault.when in prompt:
                    fault.times -= 1
                    return fault
        return None

    def calls(self, containing: str = "", fault: bool | None = None) -> list[Logged]:
        """The requests whose prompt contains ``containing`` (``fault``: only those with / without a fault)."""
        with self._lock:
            return [r for r in self.requests if containing in r.prompt
                    and (fault is None or (r.fault is not None) == fault)]

    # ---------------------------------------------------------------- protocol
    def handle(self, handler: _Handler, body: dict[str, Any]) -> None:
        system, user = self.prompt(body)
        prompt = system + "\n" + user
        fault = self._take_fault(prompt)
        with self._lock:
            self.requests.append(Logged(time.monotonic(), handler.path, body, {k.lower(): v for k, v in handler.headers.items()}, prompt,
                                        fault.kind if fault else None))
        if not self.route(handler.path):
            handler.send_json(404, {"message": f"no route {handler.path}"})
            return
        kind = fault.kind if fault else None
        if kind == "reset":
            handler.reset()
            return
        if kind == "timeout":
            self._stopping.wait(self.timeout_s)
        if kind in ("throttle", "invalid", "500", "503"):
            status, headers, payload = self.error(kind, fault.seconds if fault else 1.0)
            handler.send_json(status, payload, headers)
            return
        answer = "" if kind == "empty" else scripted_answer(system, user)
        if kind == "skip":
            answer = "\n".join(answer.splitlines()[:-1])
        payload = self.answer(handler.path, body, answer, kind)
        if kind == "truncated":
            handler.send_truncated(payload)
        else:
            handler.send_json(200, payload)

    # subclasses: the protocol's shapes
    def route(self, path: str) -> bool:
        raise NotImplementedError

    def prompt(self, body: dict[str, Any]) -> tuple[str, str]:
        raise NotImplementedError

    def error(self, kind: str, seconds: float) -> tuple[int, dict[str, str], Any]:
        raise NotImplementedError

    def answer(self, path: str, body: dict[str, Any], text: str, kind: str | None) -> Any:
        raise NotImplementedError


_LABEL_RIVALS = {"supported": (-0.3, {" unknown": -1.5, " contradicted": -4.0}),
                 "unknown": (-0.4, {" supported": -1.2, " contradicted": -3.0})}


def openai_logprobs(text: str) -> dict[str, Any]:
    """OpenAI's ``logprobs`` of an answer: one token per word (with its leading space) or other character; a judge
    label at a fixed log-probability, beside its rivals in ``top_logprobs``, every other token at -0.01.

    >>> [(t["token"], t["logprob"]) for t in openai_logprobs("1: unknown")["content"]]
    [('1', -0.01), (':', -0.01), (' unknown', -0.4)]
    """
    content = []
    for token in re.findall(r" ?\w+|.", text, re.S):
        logprob, rivals = _LABEL_RIVALS.get(token.strip(), (-0.01, {}))
        top = [{"token": token, "logprob": logprob, "bytes": None}]
        top += [{"token": t, "logprob": lp, "bytes": None} for t, lp in rivals.items()]
        content.append({"token": token, "logprob": logprob, "bytes": None, "top_logprobs": top})
    return {"content": content, "refusal": None}


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class BedrockConverseServer(EmulatorServer):
    """Bedrock Runtime's Converse (``POST /model/{modelId}/converse``), as in botocore's service model."""

    _PATH = re.compile(r"^/model/(?P<model>[^/]+)/converse$")
    _ERRORS = {
        "throttle": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
        "invalid": (400, "ValidationException", "The provided request is not valid."),
        "500": (500, "InternalServerException", "The server encountered an internal error."),
        "503": (503, "ServiceUnavailableException", "The service is unavailable. Try again later."),
    }

    def route(self, path: str) -> bool:
        return self._PATH.match(path) is not None

    def model_ids(self) -> list[str]:
        """The model ids the requests named (URL-decoded)."""
        return [unquote(m["model"]) for r in self.calls() if (m := self._PATH.match(r.path))]

    def prompt(self, body: dict[str, Any]) -> tuple[str, str]:
        system = _text(body.get("system"))
        user = "\n".join(_text(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user")
        return system, user

    def error(self, kind: str, seconds: float) -> tuple[int, dict[str, str], Any]:
        status, name, message = self._ERRORS[kind]
        headers = {"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                   "x-amzn-RequestId": "00000000-0000-0000-0000-000000000000"}
        if kind == "throttle":
            headers["Retry-After"] = str(int(seconds))
        return status, headers, {"message": message}

    def answer(self, path: str, body: dict[str, Any], text: str, kind: str | None) -> Any:
        content: list[dict[str, Any]] = [{"text": text}] if text else []
        stop = "end_turn"
        if kind == "refusal":
            content, stop = [{"text": "I'm sorry, I can't help with that."}], "content_filtered"
        elif kind == "blocks" and text:
            half = len(text) // 2
            content = [{"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "x"}}},
                       {"text": text[:half]}, {"text": text[half:]}]
        prompt_tokens = _tokens(json.dumps(body.get("messages", [])))
        out_tokens = _tokens(text)
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": {"inputTokens": prompt_tokens, "outputTokens": out_tokens,
                      "totalTokens": prompt_tokens + out_tokens},
            "metrics": {"latencyMs": 1},
        }


class AnthropicMessagesServer(EmulatorServer):
    """Anthropic's Messages API (``POST /v1/messages``)."""

    _ERRORS = {
        "throttle": (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        "invalid": (400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
        "500": (500, "api_error", "Internal server error"),
        "503": (529, "overloaded_error", "Overloaded"),
    }

    def route(self, path: str) -> bool:
        return path.rstrip("/").endswith("/v1/messages")

    def prompt(self, body: dict[str, Any]) -> tuple[str, str]:
        system = _text(body.get("system"))
        user = "\n".join(_text(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user")
        return system, user

    def error(self, kind: str, seconds: float) -> tuple[int, dict[str, str], Any]:
        status, name, message = self._ERRORS[kind]
        headers = {"request-id": "req_emulated", "x-should-retry": "false" if kind == "invalid" else "true"}
        if kind == "throttle":
            headers["retry-after"] = str(int(seconds))
        return status, headers, {"type": "error", "error": {"type": name, "message": message}}

    def answer(self, path: str, body: dict[str, Any], text: str, kind: str | None) -> Any:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        stop = "end_turn"
        if kind == "refusal":
            content, stop = [], "refusal"
        elif kind == "blocks" and text:
            half = len(text) // 2
            content = [{"type": "thinking", "thinking": "Let me think.", "signature": "x"},
                       {"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]
        return {
            "id": f"msg_{len(self.requests):06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": _tokens(json.dumps(body.get("messages", []))), "output_tokens": _tokens(text)},
        }


class OpenAIChatServer(EmulatorServer):
    """OpenAI's chat completions (``POST /v1/chat/completions``), as OpenAI-compatible servers speak them."""

    _ERRORS = {
        "throttle": (429, "rate_limit_exceeded", "Rate limit reached for requests"),
        "invalid": (400, "context_length_exceeded", "This model's maximum context length is 4096 tokens."),
        "500": (500, "server_error", "The server had an error while processing your request."),
        "503": (503, "server_error", "The engine is currently overloaded, please try again later."),
    }

    def route(self, path: str) -> bool:
        return path.rstrip("/").endswith("/chat/completions")

    def prompt(self, body: dict[str, Any]) -> tuple[str, str]:
        messages = body.get("messages", [])
        system = "\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
        user = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        return system, user

    def error(self, kind: str, seconds: float) -> tuple[int, dict[str, str], Any]:
        status, code, message = self._ERRORS[kind]
        headers = {"x-should-retry": "false" if kind == "invalid" else "true"}
        if kind == "throttle":
            headers["retry-after"] = str(int(seconds))
        kind_name = "invalid_request_error" if kind == "invalid" else "requests" if kind == "throttle" else "server_error"
        return status, headers, {"error": {"message": message, "type": kind_name, "param": None, "code": code}}

    def answer(self, path: str, body: dict[str, Any], text: str, kind: str | None) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        finish = "stop"
        if kind == "refusal":
            message, finish = {"role": "assistant", "content": None, "refusal": "I'm sorry, I can't help with that."}, "stop"
        prompt_tokens = _tokens(json.dumps(body.get("messages", [])))
        return {
            "id": f"chatcmpl-{len(self.requests):06d}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": openai_logprobs(text) if body.get("logprobs") and kind != "refusal" else None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": _tokens(text),
                      "total_tokens": prompt_tokens + _tokens(text)},
        }
