"""ComponentResources of the stack: cloud layer (Network, Cluster, NodePools, NasStorage) and
Kubernetes layer (SharedVolume, TrainingJob, TensorBoard)."""
