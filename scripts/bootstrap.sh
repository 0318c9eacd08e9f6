#!/usr/bin/env bash
# Creates .venv and installs requirements.txt into it; a no-op when nothing changed.
# Run it (`bash scripts/bootstrap.sh`), don't source it; progress goes to stderr.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$repo/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "bootstrap: creating $venv" >&2
  python3 -m venv "$venv"
fi
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "bootstrap: installing requirements.txt into .venv (about a minute)" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$repo/requirements.txt"
  echo "$want" > "$stamp"
fi
