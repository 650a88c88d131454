"""docs/architecture.md says what the package is: its layers are the import contract's, its map names every module."""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _norm(layer: str) -> str:
    return " | ".join(part.strip() for part in layer.split("|"))


def test_the_layers_are_the_import_contracts() -> None:
    block = re.search(r"<!-- layers: pyproject.toml \[tool.importlinter\] -->\n```text\n(.*?)```", PAGE, re.S)
    assert block, "the layers block is missing from docs/architecture.md"
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c["layers"] for c in contract["contracts"] if c["type"] == "layers")
    assert block.group(1).strip().splitlines() == [_norm(layer) for layer in layers]


def test_the_module_map_names_every_module_and_package() -> None:
    package = ROOT / "grapheval_plugins"
    names = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    names |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    map_text = PAGE[PAGE.index("## Module map"):]
    missing = sorted(name for name in names if f"`{name}`" not in map_text)
    assert not missing, f"docs/architecture.md's module map does not name {missing}"


def test_the_picture_is_rendered_from_its_source() -> None:
    assert "(assets/architecture.svg)" in PAGE
    svg = (ROOT / "docs" / "assets" / "architecture.svg").read_text(encoding="utf-8")
    dot = (ROOT / "docs" / "assets" / "architecture.dot").read_text(encoding="utf-8")
    for label in re.findall(r"<b>([^<]+)</b>", dot):  # every layer the source draws is in the rendered picture
        assert label.strip() in svg
