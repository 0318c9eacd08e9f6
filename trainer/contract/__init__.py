"""What the Kubernetes stack (infra/) relies on in the trainer: change it only with infra/.

infra/ imports these modules, and only these, from the trainer; they are pure Python (no
TensorFlow, no Pulumi), so the stack imports them without the trainer's packages and the
trainer image never needs Pulumi:

- ``cluster_spec``: the cluster spec and TF_CONFIG of every task, the Kubernetes names
  ``{prefix}-{task_type}-{index}``, and the rules for name prefix, namespace and ports
  (infra/components/training.py writes each pod's TF_CONFIG with it, infra/settings/
  checks the configuration with it).
- ``exit_codes``: the exit codes that cross the pod boundary: the Jobs' podFailurePolicy
  fails a Job on ``PERMANENT_EXIT_CODES`` and ignores ``EXIT_SIGTERM``.
- ``recipe``: the choices of the recipe flags (--model, --optimizer, --lr_schedule,
  --lr_scaling), --augment_shift's limit and the data file names, with which the stack
  validates its hyperparams.* keys and data.source (trainer/flags.py takes its choices there).
- ``progress``: the lines the chief prints and their parser, which ``python -m
  infra.status`` reads from the chief's log (``parse_log``); the TensorBoard tags and
  ``result.json``.
- ``printable``: server text (an HTTP reason, a pod's message) made safe to print, one rule
  for the trainer's error lines, ``pulumi up``'s messages and ``infra.status``.
- ``package_folder``: the folder a package set is installed into (``<set>-<digest of its
  requirement file>``), where the setup Job's installer puts it (trainer/install.py) and the
  pods' PYTHONPATH looks (infra/bundle.py).

What infra/ relies on without importing it:

- The commands ``python -m trainer`` (every task; dispatches on TF_CONFIG) and ``python -m
  trainer.stage --dest DIR [--source DIR_OR_URL]...`` (the staging Job; one ``--source`` per
  file URL of a list), run from the image's working directory (docker/trainer-*.Dockerfile).
- The flags that ``trainer_args()`` in infra/components/task_jobs.py passes to every task,
  defined in trainer/flags.py: ``--data_dir``, ``--log_dir``, ``--epochs``,
  ``--batch_size``, ``--learning_rate``, ``--model``, ``--optimizer``, ``--lr_schedule``,
  ``--lr_scaling``, ``--dropout``, ``--label_smoothing``, ``--augment_shift``, ``--seed``,
  ``--precision``, ``--local_steps``, ``--peer_timeout`` and ``--run_id``
  (tests/infra/test_infra_recipe.py parses every task's args with the trainer's own parser).
- The layout of ``--log_dir`` on the shared volume: ``logs/<task>.log`` (trainer/tasklog.py;
  infra.status points there), TensorBoard's events under ``train/`` and ``validation/``
  (``progress.TENSORBOARD_SUBDIRS``; a TensorBoard on ``--log_dir`` or on a directory of
  runs shows them), and the exported model under ``export/<epochs>/``
  (``progress.EXPORT_SUBDIR``, TF Serving's model base path; result.json's ``saved_model``
  names the version and ``saved_model_files`` the SHA-256 of each of its files, which
  ``python -m trainer.evaluate`` checks before it loads it). The stack's task pods mount
  ``--log_dir`` and ``--data_dir`` alone (``--data_dir`` read-only), at those paths.
"""
