"""Browser tests: a real headless Chromium (the system's ``chromium``) opens generated reports.

Skipped, with the reason shown, when Chromium or playwright is missing, except in CI (``CI=true``), where
``.ci/run`` installs Chromium and a missing browser fails the run. Network sockets stay disabled in the test process;
the browser is driven over a pipe, and every request it makes other than to a ``file:`` URL is recorded and refused.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_socket import disable_socket, enable_socket

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
"""Screenshots are also copied here (git-ignored), so a CI log or a reviewer finds them at a known path."""

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()


@pytest.fixture(scope="session")
def chromium_path() -> str:
    in_ci = os.environ.get("CI", "").lower() == "true"
    path = _chromium()
    if path is None:
        if in_ci:
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install -y chromium); CI runs this test")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if in_ci:
            pytest.fail("playwright is not installed (the dev extra)")
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    return path


@pytest.fixture()
def browser_page(chromium_path: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A fresh Chromium page (own profile folder) that refuses any non-file request and records it."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=chromium_path, args=CHROMIUM_FLAGS, headless=True,
            viewport={"width": 1280, "height": 1000},
        )
        page = context.new_page()
        page.network_requests = []  # type: ignore[attr-defined]
        page.problems = []  # type: ignore[attr-defined]

        def route(r):  # type: ignore[no-untyped-def]
            if r.request.url.startswith("file:"):
                r.continue_()
            else:
                page.network_requests.append(r.request.url)  # type: ignore[attr-defined]
                r.abort()

        context.route("**/*", route)
        page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))  # type: ignore[attr-defined]
        page.on("console", lambda msg: page.problems.append(f"console {msg.type}: {msg.text}")  # type: ignore[attr-defined]
                if msg.type in ("error", "warning") else None)
        try:
            yield page
        finally:
            context.close()


@pytest.fixture()
def screenshot(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``screenshot(page, name)``: saves ``tmp_path/name`` (the test's output) and a copy in tests/artifacts/."""

    def take(page, name: str) -> Path:  # type: ignore[no-untyped-def]
        path = tmp_path / name
        page.screenshot(path=str(path))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(path, ARTIFACTS / name)
        return path

    return take
