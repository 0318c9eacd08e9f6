"""ComponentResources of the stack: cloud layer (Network, Cluster, NodePools, NasStorage) and
Kubernetes layer (SharedVolume, PullSecret, TrainingJob, TensorBoard; pods.py: pod spec parts they share)."""
