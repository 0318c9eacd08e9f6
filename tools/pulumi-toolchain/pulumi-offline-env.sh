# Source this (bash) to run the Pulumi CLI by hand with no internet, the way tests/preview does:
#   source tools/pulumi-toolchain/pulumi-offline-env.sh
#   export PULUMI_CONFIG_PASSPHRASE=...      # your stack's passphrase (never set here)
#   pulumi stack select dev --create --secrets-provider passphrase
#   pulumi preview
# It finds or builds the toolchain (tools/pulumi-toolchain/pulumi-toolchain.sh), puts it on PATH, installs its
# provider plugins into a PULUMI_HOME inside the toolchain cache without downloading anything,
# and, unless you chose a backend already, keeps stack state in a local file backend there.
#
# Two things the tests do that a hand preview must do too:
# * `pulumi config set` writes Pulumi.<stack>.yaml: to try values without editing the committed
#   Pulumi.dev.yaml, copy Pulumi.yaml, Pulumi.dev.yaml, infra/ and trainer/ (and a link to
#   .venv) to a scratch directory and work there.
# * Where pulumi-resource-alicloud is BLOCKED (see the toolchain's banner: the proxy refuses its
#   modules and there are no vendored sources in ../shared/vendor/alicloud-provider or
#   $ALICLOUD_PROVIDER_VENDOR_DIR), the committed dev
#   stack (which creates the cloud layer) cannot be previewed: its preview ends in "no resource
#   plugin 'pulumi-resource-alicloud'" and a Python traceback. Preview the Kubernetes layer
#   against an unreachable cluster instead, as tests/preview does:
#     pulumi config set --secret kubeconfig "$(cat my-kubeconfig.yaml)"   # e.g. server https://127.0.0.1:1
#     pulumi config set nas.mountTargetDomain 0a1b2c3d4e-abc12.cn-hangzhou.nas.aliyuncs.com
_pulumi_offline_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_pulumi_offline_bin="$(bash "$_pulumi_offline_repo/tools/pulumi-toolchain/pulumi-toolchain.sh" | tail -n 1)" || return 1
_pulumi_offline_cache="$(dirname "$_pulumi_offline_bin")"
export PATH="$_pulumi_offline_bin:$PATH"
export PULUMI_HOME="${PULUMI_HOME:-$_pulumi_offline_cache/home}"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_IGNORE_AMBIENT_PLUGINS=true   # use the plugins installed below, by version
if [ -z "${PULUMI_BACKEND_URL:-}" ]; then
  mkdir -p "$_pulumi_offline_cache/state"
  export PULUMI_BACKEND_URL="file://$_pulumi_offline_cache/state"
fi
# Plugin versions = the pip SDKs in requirements.txt (what the SDKs ask the engine for).
for _pulumi_offline_p in kubernetes:4.25.0 alicloud:3.95.0; do
  _pulumi_offline_name="${_pulumi_offline_p%%:*}"
  _pulumi_offline_version="${_pulumi_offline_p#*:}"
  _pulumi_offline_dir="$PULUMI_HOME/plugins/resource-$_pulumi_offline_name-v$_pulumi_offline_version"
  # An install that was killed leaves its directory beside a .partial marker (seen: an empty
  # directory, after which every `pulumi up` failed with "no resource plugin ... found"):
  # install again over it.
  if [ -x "$_pulumi_offline_bin/pulumi-resource-$_pulumi_offline_name" ] &&
    { [ ! -d "$_pulumi_offline_dir" ] || [ -e "$_pulumi_offline_dir.partial" ]; }; then
    pulumi plugin install resource "$_pulumi_offline_name" "$_pulumi_offline_version" --reinstall \
      --file "$_pulumi_offline_bin/pulumi-resource-$_pulumi_offline_name" >&2
  fi
done
if [ -e "$_pulumi_offline_bin/BLOCKED-pulumi-resource-alicloud" ]; then
  echo "pulumi-offline-env: no alicloud provider here: preview with kubeconfig and" \
    "nas.mountTargetDomain set (see the header of tools/pulumi-toolchain/pulumi-offline-env.sh)" >&2
fi
unset _pulumi_offline_repo _pulumi_offline_bin _pulumi_offline_cache _pulumi_offline_p \
  _pulumi_offline_name _pulumi_offline_version _pulumi_offline_dir
