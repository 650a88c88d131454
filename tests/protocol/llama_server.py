"""``python -m llama_cpp.server`` with llama.cpp's weight repacking into extra buffer types off, as grapheval's own
loader keeps it (:func:`grapheval_plugins.local.runtime.load_llama`): the AMX repack path crashes on some CPUs, and
the server has no option for it. Run as ``python llama_server.py <llama_cpp.server arguments>``."""

from __future__ import annotations

import llama_cpp
from llama_cpp.server.__main__ import main

from grapheval_plugins.local.runtime import llama_without_extra_buffers

if __name__ == "__main__":
    llama_cpp.Llama = llama_without_extra_buffers(llama_cpp.Llama)  # the server builds its model through it
    main()
