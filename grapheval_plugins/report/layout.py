"""Where each entity of a knowledge graph is drawn: a force-directed layout computed by networkx (docs/report.md).

>>> pos = layout([("Ann", "Paris"), ("Ann", "France")], width=400, height=300)
>>> sorted(pos), all(0 <= x <= 400 and 0 <= y <= 300 for x, y in pos.values())
(['Ann', 'France', 'Paris'], True)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from .._imports import require

__all__ = ["layout"]

K = TypeVar("K", bound=Hashable)


def layout(
    edges: Sequence[tuple[K, K]],
    *,
    width: float,
    height: float,
    margin: float = 60.0,
) -> dict[K, tuple[float, float]]:
    """Node positions inside a ``width × height`` box (``margin`` kept free on each side), as docs/report.md says."""
    nodes = list(dict.fromkeys(n for edge in edges for n in edge))
    if not nodes:
        return {}
    cx, cy = width / 2, height / 2
    if len(nodes) == 1:
        return {nodes[0]: (cx, cy)}
    if len(nodes) == 2:
        return {nodes[0]: (margin + 40, cy), nodes[1]: (width - margin - 40, cy)}
    nx = require("networkx", "report", "to lay out the knowledge graph of an HTML report")
    graph = nx.Graph()
    graph.add_nodes_from(range(len(nodes)))
    index = {n: i for i, n in enumerate(nodes)}
    graph.add_edges_from((index[a], index[b]) for a, b in edges if a != b)
    components = sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: (-len(c), c[0]))
    inner_w, inner_h = width - 2 * margin, height - 2 * margin
    # Each connected component gets its own box: the largest the top band (all of it when alone), the others
    # share the bottom band, widths in proportion to their sizes. Within a box, Fruchterman–Reingold.
    boxes: list[tuple[float, float, float, float]] = []
    if len(components) == 1:
        boxes.append((margin, margin, inner_w, inner_h))
    else:
        top = inner_h * (0.62 if len(components[0]) > 2 else 0.5)
        boxes.append((margin, margin, inner_w, top - 30))
        rest = components[1:]
        total = sum(len(c) for c in rest)
        x = margin
        for c in rest:
            w = inner_w * len(c) / total
            boxes.append((x, margin + top + 30, w, inner_h - top - 30))
            x += w
    out: dict[K, tuple[float, float]] = {}
    for members, (bx, by, bw, bh) in zip(components, boxes):
        if len(members) == 1:
            out[nodes[members[0]]] = (bx + bw / 2, by + bh / 2)
            continue
        sub = graph.subgraph(members)
        raw = nx.spring_layout(sub, seed=0, iterations=50, k=1.6 / len(members) ** 0.5)
        xs = [float(p[0]) for p in raw.values()]
        ys = [float(p[1]) for p in raw.values()]
        span_x = (max(xs) - min(xs)) or 1.0
        span_y = (max(ys) - min(ys)) or 1.0
        for i, p in raw.items():
            out[nodes[i]] = (bx + (float(p[0]) - min(xs)) / span_x * bw, by + (float(p[1]) - min(ys)) / span_y * bh)
    return out
