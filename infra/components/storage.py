"""SharedVolume: the run's static PersistentVolume (NAS through CSI, an NFS server, or a node
directory) and the claim that binds to it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.components.labels import recommended_labels

#: Alibaba Cloud NAS CSI driver (flexVolume is not supported on new ACK clusters).
NAS_CSI_DRIVER = "nasplugin.csi.alibabacloud.com"
#: ACK's recommended NFS options; PV mountOptions override the driver's vers/options. A plain
#: NFS server gets the same (NFSv3 over TCP, no lock manager: the trainer takes no locks).
NAS_MOUNT_OPTIONS = ("nolock,tcp,noresvport", "vers=3")
#: hostPath type: the directory is made on the node when missing, never a file or socket.
HOST_PATH_TYPE = "DirectoryOrCreate"
#: The NAS PV's volumeAttributes that make its directory writable by the pods' uid, whatever it
#: is. The CSI driver (kubernetes-sigs/alibaba-cloud-csi-driver, pkg/nas) creates a missing
#: ``path`` itself, as root, mode 0755 (no_squash), chowns nothing, and its CSIDriver sets no
#: fsGroupPolicy, so a pod's fsGroup is ignored on this ReadWriteMany volume. It does run
#: ``chmod <mode> <mount point>`` after each mount when ``mode`` is set (``chmod -R`` with
#: modeType "recursive"); it refuses ``mode`` on the root path "/", which nas.path never is.
#: 1777 (sticky, like /tmp): any uid creates its own directories (mnist/, runs/), and no uid
#: removes another's. Not recursive: the files under it are the pods' own, and a recursive
#: chmod would walk every checkpoint on each mount.
NAS_MODE_ATTRIBUTES = {"mode": "1777", "modeType": "non-recursive"}
ACCESS_MODES = ("ReadWriteMany",)
#: Hex digits of the hash in the volume's name (see volume_name).
NAME_HASH_HEX = 8


def volume_name(
    name: str,
    *,
    namespace: str,
    volume_type: str,
    server_key: str,
    path: str,
    storage: str,
    match_labels: Mapping[str, str],
) -> str:
    """The PV's and the PVC's name: ``<name>-data-<8 hex>``, e.g. ``mnist-data-1a2b3c4d``.

    The hex digits are the start of the SHA-256 of everything of the pair that the API server
    will not change in place: the PV's source (type, server, path, the CSI driver or hostPath
    type; ``persistentvolumesource is immutable``), its capacity and the claim's request
    (a statically bound claim cannot be resized: "only dynamically provisioned pvc can be
    resized"), the claim's selector, access modes and class (immutable on a claim), and the
    claim's namespace (the PV's claimRef names it), and for NAS the mode attributes. A change
    to any of them gives a new name,
    so Pulumi creates the new PV and claim next to the old ones (a replacement under a new
    name is create-before-delete), replaces the pods that name the claim, and deletes the old
    pair last; the old PV's Retain policy leaves the data, which the new PV finds in the same
    directory. Anything else (replicas, hyperparameters, images) leaves the name alone.

    Args:
        name: the name prefix (<= 40 characters, infra.settings), so the name stays far below
            the 253 of a DNS subdomain, and within the 63 of a label value.
        namespace: the claim's namespace.
        server_key: plain text that stands for the server: the server itself, or for a NAS
            the stack creates (its mount target domain is unknown until it exists) what
            identifies that file system and mount target. It must be plain because pod
            templates name the claim and their hash (the run id) is taken at preview.
        path: the NAS sub-directory, NFS export or node directory, as plain text.
        storage: the capacity and request, as written in the config ("5Gi").
        match_labels: the PV's labels that the claim selects.

    A secret server or path goes into the name only through these 32 bits of a hash of all of
    the above, which cannot be reversed, though it can confirm a guess of every input.
    """
    source: dict = {"type": volume_type, "server": server_key, "path": path}
    if volume_type == "nas":
        source["driver"] = NAS_CSI_DRIVER
        source.update(NAS_MODE_ATTRIBUTES)
    elif volume_type == "hostPath":
        source["hostPathType"] = HOST_PATH_TYPE
    fixed = {
        "source": source,
        "capacity": storage,
        "matchLabels": dict(match_labels),
        "accessModes": list(ACCESS_MODES),
        "storageClassName": "",
        "namespace": namespace,
    }
    text = json.dumps(fixed, sort_keys=True, separators=(",", ":"))
    return f"{name}-data-{hashlib.sha256(text.encode()).hexdigest()[:NAME_HASH_HEX]}"


@dataclass
class SharedVolumeArgs:
    """The run's volume: where it lives and what the claim asks for.

    Attributes:
        namespace: the claim's namespace (an Output when the stack creates it).
        namespace_name: the same as plain text, for the name.
        volume_type: "nas", "nfs" or "hostPath" (infra.settings.VOLUME_TYPES).
        server: the NAS mount target domain or NFS server; None for hostPath.
        server_key: plain text standing for ``server`` in the name (see volume_name).
        path: the NAS sub-directory, NFS export or node directory (absolute).
        path_key: ``path`` as plain text (``path`` may be a secret Output).
        storage: the PV's capacity and the claim's request ("5Gi").
        match_labels: the PV's labels, which the claim selects.
        after: resources the PV waits for (the NAS mount target).
    """

    namespace: pulumi.Input[str]
    namespace_name: str
    volume_type: str
    server: pulumi.Input[str] | None
    server_key: str
    path: pulumi.Input[str]
    path_key: str
    storage: str
    match_labels: Mapping[str, str]
    after: Sequence[pulumi.Resource] = ()

    def object_name(self, name: str) -> str:
        """The PV's and the claim's name for the volume named ``name`` (``volume_name``)."""
        return volume_name(
            name,
            namespace=self.namespace_name,
            volume_type=self.volume_type,
            server_key=self.server_key,
            path=self.path_key,
            storage=self.storage,
            match_labels=self.match_labels,
        )


PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"


def object_names(name: str, args: SharedVolumeArgs) -> list[tuple[str, str]]:
    """``(Pulumi type, object name)`` of the objects ``SharedVolume(name, args)`` creates: the
    PV (cluster-scoped) and the claim (in ``args.namespace_name``), one name for both."""
    object_name = args.object_name(name)
    return [(PERSISTENT_VOLUME, object_name), (PERSISTENT_VOLUME_CLAIM, object_name)]


def pv_source(args: SharedVolumeArgs, volume_handle: str) -> dict:
    """The PV spec's source fields for ``args.volume_type`` (PersistentVolumeSpecArgs keywords).

    Raises:
        ValueError: an unknown volume type, or a NAS or NFS volume without a server.
    """
    if args.volume_type in ("nas", "nfs"):
        server = args.server
        if server is None:
            raise ValueError(f"a {args.volume_type} volume needs a server")
        if args.volume_type == "nfs":
            return {
                "mount_options": list(NAS_MOUNT_OPTIONS),
                "nfs": k8s.core.v1.NFSVolumeSourceArgs(server=server, path=args.path),
            }
        return {
            "mount_options": list(NAS_MOUNT_OPTIONS),
            "csi": k8s.core.v1.CSIPersistentVolumeSourceArgs(
                driver=NAS_CSI_DRIVER,
                volume_handle=volume_handle,
                # The driver refuses a server containing ':'; the directory goes in path.
                volume_attributes={"server": server, "path": args.path, **NAS_MODE_ATTRIBUTES},
            ),
        }
    if args.volume_type == "hostPath":
        # No mountOptions: the API server refuses them on a hostPath PV.
        return {"host_path": k8s.core.v1.HostPathVolumeSourceArgs(path=args.path, type=HOST_PATH_TYPE)}
    raise ValueError(f"unknown volume type {args.volume_type!r}")


#: Where each volume type's directory lives, and who can change its owner there.
_WHERE = {
    "hostPath": ("hostPath.path {path} on the node", "on the node"),
    "nfs": (
        "nfs.path {path} on the NFS server (nfs.server)",
        "on the NFS server, or as root on a machine that mounts the export without root squashing",
    ),
    "nas": (
        "nas.path {path} on the NAS file system, which the CSI driver makes writable by every uid "
        "(mode 1777) but not what is under it",
        "as root on a machine that mounts the NAS file system",
    ),
}


def unwritable_hint(volume_type: str, path: str | None, mount_path: str, uid: int, gid: int) -> str:
    """What the staging Job's error says after the facts (trainer.stage ``--volume_hint``): where
    the volume's directory lives, and the fixes, for ``pods.runAsUser`` ``uid`` and
    ``pods.runAsGroup`` ``gid``.

    Args:
        path: the directory as configured (hostPath.path, nfs.path, nas.path); None when it is
            a secret, which the pod spec must not show.

    Raises:
        KeyError: an unknown volume type.
    """
    where, fix_at = _WHERE[volume_type]
    shown = path if path is not None else "<the directory>"
    return (
        f"The volume at {mount_path} is {where.format(path=path if path is not None else '(a secret)')}. "
        f"Fix: {fix_at}, `chown -R {uid}:{gid} {shown}`; or, if that directory belongs to a user other than "
        "root, run the pods as that user: `pulumi config set pods.runAsUser <its uid>` and `pulumi config set "
        "pods.runAsGroup <its gid>`. Then run `pulumi up` again: it replaces the failed staging Job."
    )


class SharedVolume(pulumi.ComponentResource):
    """The run's ReadWriteMany volume.

    Children (Pulumi names ``<prefix>-data``; object names ``volume_name``, the same for both):
    ``pv`` (PersistentVolume: labels = match_labels, Retain, storageClassName "", and by
    ``args.volume_type``: ``nas``, CSI with server = the mount target domain, path = a NAS
    sub-directory and NAS_MODE_ATTRIBUTES, which make it writable by the pods; ``nfs``, the
    in-tree nfs volume with the same mount options; ``hostPath``, a node directory of type
    DirectoryOrCreate, which the API accepts as ReadWriteMany for a static PV, so the same
    claim serves every type) and ``pvc`` (PersistentVolumeClaim:
    selector = match_labels, storageClassName "" so no default StorageClass takes it,
    volumeName pre-binding it to this PV, so a second run's PV with the same labels, or an
    earlier PV of this run, cannot take its place).

    What the API server cannot change in place is in the object names (``volume_name``): a
    new capacity, selector, namespace or source makes a new pair instead of an update that the
    API server refuses (resizing a static claim) or a claim replaced under its old name that
    stays Pending on the Released old PV (a new selector). The Pulumi names stay, so the
    engine sees a replacement of each; under a new object name that is create-before-delete,
    and the old objects go last, after the pods that mounted them (see TrainingJob).

    Outputs:
        pv_name, pvc_name. ``claim_name`` is the same name as a plain string, for pod
        templates that must be known in full at preview (the run id is their hash).
    """

    pv_name: pulumi.Output[str]
    pvc_name: pulumi.Output[str]
    claim_name: str

    def __init__(self, name: str, args: SharedVolumeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tf-mnist:index:SharedVolume", name, None, opts)
        logical_name = f"{name}-data"
        object_name = args.object_name(name)
        labels = {**recommended_labels(name, "storage"), **args.match_labels}
        self.pv = k8s.core.v1.PersistentVolume(
            logical_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=object_name, labels=labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": args.storage},
                access_modes=list(ACCESS_MODES),
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                **pv_source(args, object_name),
            ),
            # `after` holds the NAS mount target: the PV must not exist before its server does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
        )
        self.pvc = k8s.core.v1.PersistentVolumeClaim(
            logical_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=args.namespace, labels=recommended_labels(name, "storage")
            ),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=list(ACCESS_MODES),
                storage_class_name="",
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": args.storage}),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(args.match_labels)),
                # Pre-bound: the claim takes this PV only (the selector stays, and must match).
                # The plain name, not the PV's output: on a cluster the stack is still to create
                # every Kubernetes output is unknown at preview, and the plan must show which PV
                # the claim binds. depends_on keeps the order (claim after its PV, before it on
                # delete) that the output used to give.
                volume_name=object_name,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.pv]),
        )
        self.claim_name = object_name
        self.pv_name = self.pv.metadata.name
        self.pvc_name = self.pvc.metadata.name
        self.register_outputs({"pv_name": self.pv_name, "pvc_name": self.pvc_name})
