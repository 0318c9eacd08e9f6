"""Text from a server made safe to print on a terminal.

An HTTP reason phrase, an API server's message, a registry's error, a pod's termination
message: text the project passes on from elsewhere may hold control characters (an escape
sequence moves the cursor, clears the screen, recolours or retitles the terminal; a carriage
return overwrites the line before it). ``printable`` writes each one as its Python escape
(``\\x1b``), keeping newlines and tabs, so what is shown is what was sent. Pure Python: infra/
imports it for ``pulumi up`` messages and ``infra.status``; the trainer for its error lines.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F; a terminal may
#: take U+009B as CSI, the start of an escape sequence).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every CONTROL character written as its escape (``"\\x1b[2J"`` -> ``"\\\\x1b[2J"``)."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
