//go:build tools

// Package tools pins the Kubernetes command packages built from this module so `go mod tidy`
// keeps their dependencies in go.sum (the three programs under cmd/ are this module's own).
// tools/local-cluster/build.sh builds them together with ./cmd/coredns and ./cmd/network-policies:
//
//	go build -o DIR/ ./cmd/coredns ./cmd/network-policies k8s.io/kubernetes/cmd/kube-apiserver \
//	  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
//	  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
