"""A real single-node Kubernetes cluster on this machine (see tools/local-cluster/README.md)."""
