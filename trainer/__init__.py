"""The TensorFlow trainer: distributed MNIST, one task per process (trainer/README.md).

Commands: ``python -m trainer`` (one task, dispatched on TF_CONFIG), ``python -m
trainer.local`` (a whole run on one machine), ``python -m trainer.stage`` (put MNIST where
the tasks read it), ``python -m trainer.board`` and ``python -m trainer.report`` (see
runs: TensorBoard, a PNG of their learning curves), ``python -m trainer.evaluate`` (an
exported model's test accuracy, with plain TensorFlow: it imports nothing from here).

Parts: ``contract/`` (what infra/ imports: cluster spec and TF_CONFIG, exit codes, the
progress lines), ``training/`` (the chief's and synchronous workers' training),
``launcher/`` (the local launcher), and the task's own modules: flags, data, model, packed
(the weights in one vector), servers (ps and workers), tasklog (each task's log file),
packages (what a task imports), autograph_files and log_noise.
"""

from trainer.cpu_kernels import prefer_onednn

# Before any module of the package imports TensorFlow, which reads it once (cpu_kernels).
prefer_onednn()
