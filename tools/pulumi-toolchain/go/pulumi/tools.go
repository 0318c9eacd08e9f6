//go:build tools

// Package tools pins the Pulumi CLI's command package so `go mod tidy` keeps its
// dependencies in go.sum; the build itself runs `go build github.com/pulumi/pulumi/pkg/v3/cmd/pulumi`.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
