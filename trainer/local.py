"""``python -m trainer.local``: the whole distributed topology on one machine, the command's
entry point; the launcher itself is trainer/launcher/."""

import sys

from trainer.launcher.cli import main

if __name__ == "__main__":
    sys.exit(main())
