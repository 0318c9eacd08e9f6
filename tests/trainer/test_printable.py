"""Server text reaches terminals as text: trainer/contract/printable.py, the run monitor's copy of
its rule, and a real ``python -m trainer.stage`` against a server whose error carries escape
sequences."""

from __future__ import annotations

import http.server
import subprocess
import sys
from pathlib import Path

import pytest

from infra import run_monitor
from tests.loopback_http import serving
from trainer.contract.printable import printable

REPO = Path(__file__).resolve().parents[2]
#: Clear the screen, move home, set the window title, a CSI in C1 form, a carriage return, DEL.
HOSTILE = "no\x1b[2J\x1b[H\x1b]0;owned\x07 \x9b31m\rx\x7f"


@pytest.mark.parametrize("rule", [printable, run_monitor.printable])
def test_control_characters_are_written_as_their_escapes(rule):
    assert rule(HOSTILE) == "no\\x1b[2J\\x1b[H\\x1b]0;owned\\x07 \\x9b31m\\rx\\x7f"
    assert rule("a\tb\nc é 漢") == "a\tb\nc é 漢"  # tabs, newlines and letters stay


def test_a_servers_reason_phrase_reaches_stages_error_line_as_text(tmp_path):
    class Hostile(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            self.send_response(418, HOSTILE)  # permanent: one try
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with serving(Hostile) as base:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.stage",
                "--dest",
                str(tmp_path / "data"),
                "--source",
                f"{base}/train-images-idx3-ubyte.gz",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stderr and "\x9b" not in proc.stderr and "\r" not in proc.stderr
    assert "HTTP 418 no\\x1b[2J\\x1b[H" in proc.stderr, proc.stderr
