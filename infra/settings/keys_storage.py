"""The keys of each kind of persistent volume: the NAS file system (created or existing), an
NFS server's export, and a node's directory (hostPath).

The last part of the key table; infra/settings/keys.py joins the parts into ``KEYS``.
"""

from __future__ import annotations

from infra.settings.cloud_parsers import optional_choice
from infra.settings.key import Key
from infra.settings.key_values import NAS_STORAGE_TYPES, NAS_ZONE_CHECKS, NEW_NAS_STORAGE_TYPE
from infra.settings.parsers import absolute_path, boolean, export_path, nfs_server, one_of, optional_string

STORAGE_KEYS: tuple[Key, ...] = (
    # Not declared in Pulumi.yaml, like cluster.networkPlugin: unset, the type comes from the state.
    Key(
        "nas.storageType",
        None,
        optional_choice(NAS_STORAGE_TYPES),
        "Storage type of the general-purpose NAS file system the stack creates (Capacity, Performance, Premium), in "
        "zone; unset = Capacity for a new file system (the cheapest per GiB; this job moves megabytes), and for one "
        "the stack already created the type it has (read from the stack's state: a change replaces it, empty).",
        fix=NEW_NAS_STORAGE_TYPE,
    ),
    # Not every zone offers every type (NAS DescribeZones lists them per zone), and NAS refuses a
    # type the zone lacks only when `pulumi up` creates the file system, after the network and
    # the cluster exist. The question needs the cloud: an offline preview cannot ask it.
    Key(
        "nas.zoneCheck",
        "up",
        one_of(NAS_ZONE_CHECKS),
        "When the stack asks NAS (DescribeZones) whether zone offers nas.storageType before it creates the NAS "
        "file system: up (at `pulumi up`, before any resource is created), always (at preview too; needs the "
        "cloud) or off (never; NAS then refuses a type the zone lacks when it creates the file system).",
        fix="off",
    ),
    Key(
        "nas.retainOnDestroy",
        True,
        boolean,
        "Keep the NAS file system (and its data) when the stack is destroyed.",
        fix="false",
    ),
    Key(
        "nas.path",
        "/data",
        absolute_path,
        "Directory on the NAS that the PV mounts; the CSI driver creates it when missing and makes it writable "
        "by every uid (mode 1777, not recursive).",
    ),
    Key(
        "nas.mountTargetDomain",
        None,
        optional_string,
        "Existing NAS mount target: the stack then creates no NAS (without kubeconfig it must be in the "
        "VPC of vpc.id or vswitch.id).",
        fix="xxxx.cn-hangzhou.nas.aliyuncs.com",
    ),
    Key(
        "nas.fileSystemId",
        None,
        optional_string,
        "Existing standard NAS file system (without kubeconfig): the stack creates only its access group, "
        "rule and mount target in the node vSwitch.",
        fix="0a1b2c3d4e",
    ),
    Key(
        "nfs.server",
        None,
        nfs_server,
        "NFS server of persistence.volume.type nfs (host name or IP address).",
        fix="nfs.example.internal",
    ),
    Key(
        "nfs.path",
        None,
        export_path,
        "Exported directory that the PV mounts (persistence.volume.type nfs); must be writable by "
        "pods.runAsUser (root squashing off).",
        fix="/exports/tf-mnist",
    ),
    Key(
        "hostPath.path",
        "/var/lib/tf-mnist",
        absolute_path,
        "Directory on the node that backs the PV (persistence.volume.type hostPath); must be writable by "
        "pods.runAsUser (created root-owned, mode 0755, when missing: the staging Job then fails and says how "
        "to fix it).",
    ),
)
