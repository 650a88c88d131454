"""The package's one progress bar: tqdm, imported when a bar is made, cleared when done; off unless wanted."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar", "show_bars"]


def progress_bar(total: int | None, desc: str, *, unit: str = "row", enabled: bool = True, leave: bool = False,
                 **options: Any) -> Any:  # a tqdm bar (tqdm ships no type hints)
    """A tqdm bar over ``total`` units (``options`` go to tqdm, e.g. ``unit_scale=True`` for bytes).

    >>> bar = progress_bar(3, "rows", enabled=False)
    >>> bar.update(3); bar.close()
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, leave=leave, **options)


def show_bars(show: bool | None, default: bool | None, rows: int) -> bool:
    """Whether a batch run of ``rows`` rows draws its bars: ``show`` as given, else the object's ``default``, else
    with two rows or more on a terminal.

    >>> show_bars(None, False, 10), show_bars(True, False, 1)
    (False, True)
    """
    if show is None:
        show = default
    if show is None:
        show = rows > 1 and sys.stderr.isatty()
    return bool(show)
