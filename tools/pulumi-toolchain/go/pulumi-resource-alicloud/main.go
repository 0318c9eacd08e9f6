// Command pulumi-resource-alicloud serves the Pulumi Alibaba Cloud provider (a bridged
// Terraform provider).
//
// It replaces the upstream cmd/pulumi-resource-alicloud main, whose schema-embed.json is made by
// `go generate` and is not in the module zip. tools/pulumi-toolchain/pulumi-toolchain.sh copies this module into a
// build directory, writes schema-embed.json there (the module's schema.json with "version" set)
// and stamps pkg/version.Version with -ldflags.
package main

import (
	_ "embed"

	alicloud "github.com/pulumi/pulumi-alicloud/provider/v3"
	"github.com/pulumi/pulumi-alicloud/provider/v3/pkg/version"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
)

//go:embed schema-embed.json
var pulumiSchema []byte

func main() {
	tfbridge.Main("alicloud", version.Version, alicloud.Provider(), pulumiSchema)
}
