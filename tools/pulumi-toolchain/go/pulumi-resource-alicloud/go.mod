// Wrapper module that builds pulumi-resource-alicloud 3.95.0 from the Go module proxy.
// The provider module is not tagged: v3.0.0-20260212042644-1124c9f72f1b is the v3.95.0 release
// commit (1124c9f72f1b, bridge v3.120.0). The replace lines repeat the provider's own non-local
// replaces at that commit; go.sum is made in the build directory by `go mod tidy`, because the
// proxy refused this module version when the wrapper was written (see tools/pulumi-toolchain/pulumi-toolchain.sh).
module github.com/tf-mnist/tools/pulumi-resource-alicloud

go 1.26.6

require github.com/pulumi/pulumi-alicloud/provider/v3 v3.0.0-20260212042644-1124c9f72f1b

replace (
	github.com/aliyun/aliyun-tablestore-go-sdk => github.com/aliyun/aliyun-tablestore-go-sdk v1.7.11
	github.com/hashicorp/terraform-exec => github.com/hashicorp/terraform-exec v0.15.0
	github.com/hashicorp/terraform-plugin-sdk/v2 => github.com/pulumi/terraform-plugin-sdk/v2 v2.0.0-20250923233607-7f1981c8674a
	github.com/spf13/afero => github.com/spf13/afero v1.4.1
)
