// Command pulumi-resource-kubernetes serves the Pulumi Kubernetes provider.
//
// It replaces the upstream cmd/pulumi-resource-kubernetes main, whose embedded files are
// produced by `go generate` and are not in the module zip. tools/pulumi-toolchain/pulumi-toolchain.sh
// copies this module (tools/go-build/kubernetes-programs) into a build directory, writes
// schema-embed.json (the provider module's schema.json with "version" set) and
// terraform-mapping-embed.json (terraform-mapping.json, compacted) beside this file, and runs
// `go build ./cmd/pulumi-resource-kubernetes`, stamping pkg/version.Version with -ldflags. The
// two files are never committed (.gitignore).
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
