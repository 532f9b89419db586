"""Where the layers below learn which modules above provide their presentation (a composition root's wiring).

A record shows itself in Jupyter through the renderers `notebook.py` registers (`_display`), and the workflow writes a
bundle's content through the writer `reports.py` registers (`bundle`). Neither lower module may import those
presentation modules, not even by name: the package's `__init__` (the top, which every import of a submodule runs
first) names them here, and the lower modules load what is named on first need. So the import graph points one way,
and a program may register its own renderers or writer instead.
"""

from __future__ import annotations

# Modules whose import registers Jupyter renderers (`_display.register_html`), loaded on a record's first display.
RENDERER_MODULES: list[str] = []
# Modules whose import registers the bundle's report writer (`bundle.register_report_writer`), loaded before the
# first release's charge.
REPORT_WRITER_MODULES: list[str] = []
