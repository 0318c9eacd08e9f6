"""ComponentResources of the stack: cloud layer (Network, Cluster, NodePools, NasStorage) and
Kubernetes layer (SharedVolume, PullSecret, TrainingJob, TensorBoard; pods.py: pod spec parts they share).

Each takes ``(name, args, opts)`` with an ``<Component>Args`` dataclass of its own; infra/target.py
creates the cloud layer or takes an existing cluster, infra/program.py wires the rest."""
