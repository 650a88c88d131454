"""Fake installed weights packages for tests: a ``*.dist-info`` folder with its RECORD, a data file, and a module
whose code, if it ever ran, would leave a mark and raise (the weights are located without importing it)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from grapheval_plugins.local.weights import WeightPart


def install_parts(site: Path, prefix: str, blobs: list[bytes], monkeypatch: pytest.MonkeyPatch,
                  version: str = "1.0") -> tuple[WeightPart, ...]:
    """Install ``blobs`` as distributions ``<prefix>1`` … under ``site`` (put on ``sys.path``); their pins."""
    parts = []
    for i, data in enumerate(blobs, start=1):
        module, dist = f"{prefix.replace('-', '_')}{i}", f"{prefix}{i}"
        rel = f"{module}/data/part{i:02d}.bin"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text(
            f"import pathlib\npathlib.Path({str(site / 'IMPORTED')!r}).write_text({module!r})\n"
            "raise RuntimeError('the code of a weights package ran')\n", encoding="utf-8")
        (site / rel).write_bytes(data)
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
        (info / "RECORD").write_text("".join(f"{name},,\n" for name in (
            f"{module}/__init__.py", rel, f"{info.name}/METADATA", f"{info.name}/RECORD")), encoding="utf-8")
        parts.append(WeightPart(dist, version, rel, len(data), hashlib.sha256(data).hexdigest()))
    monkeypatch.syspath_prepend(str(site))
    return tuple(parts)


def uninstall(site: Path, part: WeightPart) -> None:
    """Remove a fake part's distribution metadata (its data file stays, unlisted)."""
    module = part.distribution.replace("-", "_")
    shutil.rmtree(site / f"{module}-{part.version}.dist-info")


def code_ran(site: Path) -> bool:
    """Whether any fake part package's module was imported."""
    return (site / "IMPORTED").exists()
