"""The tf-mnist Pulumi program (see program.py)."""
