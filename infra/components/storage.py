"""SharedVolume: the run's static PersistentVolume (NAS through CSI, an NFS server, or a node
directory) and the claim that binds to it."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

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


def claim_name(name: str) -> str:
    """The PV's and the PVC's name for the component ``name`` (the name prefix)."""
    return f"{name}-data"


class SharedVolume(pulumi.ComponentResource):
    """The run's ReadWriteMany volume.

    Children: ``pv`` (PersistentVolume ``<prefix>-data``: labels = match_labels, Retain,
    storageClassName "", and by ``volume_type``: ``nas``, CSI with server = the mount target
    domain and path = a NAS sub-directory; ``nfs``, the in-tree nfs volume with the same mount
    options; ``hostPath``, a node directory of type DirectoryOrCreate, which the API accepts
    as ReadWriteMany for a static PV, so the same claim serves every type) and ``pvc``
    (PersistentVolumeClaim ``<prefix>-data``: selector = match_labels, storageClassName "" so
    no default StorageClass takes it, volumeName pinning the PV so a second run's PV with the
    same labels cannot take its place).

    Args:
        volume_type: "nas", "nfs" or "hostPath" (infra.settings.VOLUME_TYPES).
        server: the NAS mount target domain or NFS server; None for hostPath.
        path: the NAS sub-directory, NFS export or node directory (absolute).
        after: resources the PV waits for (the NAS mount target).

    Outputs:
        pv_name, pvc_name. ``claim_name`` is the same name as a plain string, for pod
        templates that must be known in full at preview (the run id is their hash).
    """

    pv_name: pulumi.Output[str]
    pvc_name: pulumi.Output[str]
    claim_name: str

    def __init__(self, name: str, *, namespace: pulumi.Input[str], volume_type: str,
                 server: Optional[pulumi.Input[str]], path: pulumi.Input[str], storage: str,
                 match_labels: Mapping[str, str], after: Sequence[pulumi.Resource] = (),
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("tf-mnist:index:SharedVolume", name, None, opts)
        volume_name = claim_name(name)
        labels = {**recommended_labels(name, "storage"), **match_labels}
        source: dict = {}
        if volume_type == "nas":
            source = {"mount_options": list(NAS_MOUNT_OPTIONS), "csi": k8s.core.v1.CSIPersistentVolumeSourceArgs(
                driver=NAS_CSI_DRIVER,
                volume_handle=volume_name,
                # The driver refuses a server containing ':'; the directory goes in path.
                volume_attributes={"server": server, "path": path},
            )}
        elif volume_type == "nfs":
            source = {"mount_options": list(NAS_MOUNT_OPTIONS),
                      "nfs": k8s.core.v1.NFSVolumeSourceArgs(server=server, path=path)}
        elif volume_type == "hostPath":
            # No mountOptions: the API server refuses them on a hostPath PV.
            source = {"host_path": k8s.core.v1.HostPathVolumeSourceArgs(path=path, type=HOST_PATH_TYPE)}
        else:
            raise ValueError(f"unknown volume type {volume_type!r}")
        self.pv = k8s.core.v1.PersistentVolume(
            volume_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name, labels=labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": storage},
                access_modes=["ReadWriteMany"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                **source,
            ),
            # `after` holds the NAS mount target: the PV must not exist before its server does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.pvc = k8s.core.v1.PersistentVolumeClaim(
            volume_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name, namespace=namespace,
                                                labels=recommended_labels(name, "storage")),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": storage}),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(match_labels)),
                volume_name=self.pv.metadata.name,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.claim_name = volume_name
        self.pv_name = self.pv.metadata.name
        self.pvc_name = self.pvc.metadata.name
        self.register_outputs({"pv_name": self.pv_name, "pvc_name": self.pvc_name})
