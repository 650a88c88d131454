"""The package's import graph has no cycle, between packages or between the modules inside one.

`lint-imports` (CI, ``[tool.importlinter]`` in pyproject.toml) checks the layers: each layer imports only from the
layers below it. This test checks what that contract does not see: a cycle among the modules of one layer. Imports
under ``if TYPE_CHECKING:`` are annotations only and are not counted.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")


def _cycles() -> list[list[str]]:
    graph = grimp.build_graph("grapheval_plugins", include_external_packages=False,
                              exclude_type_checking_imports=True)
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                found.append([importer, *back])
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []
