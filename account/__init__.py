"""The one-time account preparation (its own Pulumi project, ``tf-mnist-account``): see
program.py for what it does and why it is apart from the main stack."""
