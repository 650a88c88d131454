"""``python -m llama_cpp.server`` with llama.cpp's weight repacking into extra buffer types off, as grapheval's own
loader keeps it (:func:`grapheval_plugins.local.llamacpp.load_llama`): the AMX repack path crashes on some CPUs, and
the server has no option for it. Run as ``python llama_server.py <llama_cpp.server arguments>``."""

from __future__ import annotations

import llama_cpp
from llama_cpp.server.__main__ import main

from grapheval_plugins.local.llamacpp import _llama_factory


def _patch() -> None:
    cls, extra = _llama_factory(llama_cpp, False)
    if extra:
        base = cls

        class cls(base):  # type: ignore[no-redef, valid-type, misc]
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, **{**extra, **kwargs})

    llama_cpp.Llama = cls


if __name__ == "__main__":
    _patch()
    main()
