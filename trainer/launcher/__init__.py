"""The local launcher, ``python -m trainer.local``: a whole distributed run on one machine.

- ``cli``: the command line (the trainer's flags and defaults) and ``--tensorboard``.
- ``supervisor``: the tasks of the run, started, watched, restarted and stopped as
  Kubernetes' Job controller would.
- ``forkserver`` and ``preload``: every task forked from one process that has imported
  TensorFlow once.
- ``lifetime``: the task's side: it SIGKILLs itself when the launcher is gone.
- ``netns``: the tasks' private network namespace (their gRPC ports reachable from their own
  loopback only), entered by the fork server.

Standard library only, but for what the fork server preloads: the launcher itself imports
no TensorFlow.
"""
