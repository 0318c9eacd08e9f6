//go:build tools

// Package tools pins the etcd and etcdctl main packages so `go mod tidy` keeps their dependencies
// in go.sum; tools/local-cluster/build.sh runs
// `go build -o DIR/ go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3` and names the server
// binary etcd.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
