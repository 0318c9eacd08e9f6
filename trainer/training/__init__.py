"""Training: the strategy from TF_CONFIG, the custom loop, checkpoints, evaluation, results.

One loop serves all three cases:
- ps tasks -> ParameterServerStrategy; this process (the chief) is the coordinator and
  schedules functions of ``--steps_per_execution`` steps on the workers through
  tf.distribute.coordinator.ClusterCoordinator (Keras 3 has no DatasetCreator, so
  ``model.fit`` cannot drive it). Worker failures are absorbed by the coordinator (it
  re-runs the function elsewhere and rebuilds the restarted worker's dataset); a ps failure
  raises, and TensorFlow's guidance is to restart the coordinator, which resumes from the
  last checkpoint.
- workers and no ps -> MultiWorkerMirroredStrategy; every task (chief included) runs the
  loop; a lost peer makes the collectives fail, every task exits non-zero and, once
  restarted, resumes from the chief's checkpoint.
- no TF_CONFIG -> the default strategy in one process.

An epoch is ``train_examples // (batch_size x replicas)`` steps in every case, so a run
schedules exactly ``--epochs`` epochs of updates however often it is interrupted. With ps,
the coordinator runs each function at least once (TensorFlow's ClusterCoordinator): a
function a lost worker had finished but not yet reported runs again, so each lost worker
can add up to one function's steps (``--steps_per_execution``, cut at ``--log_interval``).

The parts, in the order ``run.run`` uses them: ``distribution`` (the strategy), ``schedule``
(the optimizer and its learning rate), ``checkpoints`` (the run's variables, save and
restore, and refusing another model's checkpoints) with ``checkpoint_files`` (damaged bytes
told from a volume that failed a read), ``loop`` (the epochs, the Step and Epoch lines) with
``events`` (its TensorBoard events, under the full-volume rule of ``storage``) over ``steps`` (the traced steps on the cluster, minimising ``loss``'s
objective), ``evaluation`` (test accuracy and cost), ``liveness`` (SIGTERM, lost peers, the watchdog), ``export`` (the model to
serve: SavedModel and .keras) and ``finish`` (the export, the result, the done marker, what
is kept until exit). The modules that use TensorFlow import it
at their top; ``run`` imports them only once the data and flags are checked.
"""
