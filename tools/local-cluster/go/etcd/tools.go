//go:build tools

// Package tools pins the etcd server's main package so `go mod tidy` keeps its dependencies in
// go.sum; tools/local-cluster/build.sh runs `go build -o DIR/etcd go.etcd.io/etcd/server/v3`.
// go.mod still requires etcdctl at the same release (nothing builds it): dropping it means a
// `go mod tidy` against the proxy.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
