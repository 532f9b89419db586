"""The suite's own arrangements (tests/conftest.py): the audit figures' stand-in is what an unmarked test's release
embeds, and a test marked `figures` draws the real figures end to end."""

from __future__ import annotations

import base64
import re
import struct

import pytest

import tabrelease as tr

from .conftest import PLACEHOLDER_PNG


def _images(out):
    html = (out / "internal" / "audit.html").read_text()
    return re.findall(r'<img class="wide" src="(data:image/png;base64,[^"]+)"', html)


def _png_size(uri: str) -> tuple[int, int]:
    data = base64.b64decode(uri.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_release_in_an_unmarked_test_embeds_the_stand_in(tmp_path):
    tr.publish_release(tr.builtin_table("edwards"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1),
                       tmp_path / "r")
    images = _images(tmp_path / "r")
    assert len(images) == 2 and set(images) == {PLACEHOLDER_PNG}
    assert _png_size(PLACEHOLDER_PNG) == (1, 1)


@pytest.mark.figures
def test_a_release_in_a_figures_test_draws_the_real_figures(tmp_path):
    tr.publish_release(tr.builtin_table("edwards"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1),
                       tmp_path / "r")
    images = _images(tmp_path / "r")
    assert len(images) == 2 and PLACEHOLDER_PNG not in images
    # Drawn at 80 dpi: the errors' figure is 7.2 inches wide, the panels' at least 3.5.
    assert all(width >= 280 and height >= 80 for width, height in map(_png_size, images))
