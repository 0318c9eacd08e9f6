//go:build tools

// Package tools pins crictl's main package so `go mod tidy` keeps its dependencies in go.sum;
// tools/local-cluster/build.sh builds sigs.k8s.io/cri-tools/cmd/crictl with
// -X sigs.k8s.io/cri-tools/pkg/version.Version set.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
