"""SharedVolume: a static NAS PersistentVolume (CSI) and the claim that binds to it."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.components.labels import recommended_labels

#: Alibaba Cloud NAS CSI driver (flexVolume is not supported on new ACK clusters).
NAS_CSI_DRIVER = "nasplugin.csi.alibabacloud.com"
#: ACK's recommended NFS options; PV mountOptions override the driver's vers/options.
NAS_MOUNT_OPTIONS = ("nolock,tcp,noresvport", "vers=3")


class SharedVolume(pulumi.ComponentResource):
    """The run's ReadWriteMany volume on NAS.

    Children: ``pv`` (PersistentVolume ``<prefix>-data``: CSI, server = mount target domain,
    path = a NAS sub-directory, labels = match_labels, Retain, storageClassName "") and
    ``pvc`` (PersistentVolumeClaim ``<prefix>-data``: selector = match_labels,
    storageClassName "" so no default StorageClass takes it, volumeName pinning the PV so a
    second run's PV with the same labels cannot take its place).

    Args:
        after: resources the PV waits for (the NAS mount target).

    Outputs:
        pv_name, pvc_name.
    """

    pv_name: pulumi.Output[str]
    pvc_name: pulumi.Output[str]

    def __init__(self, name: str, *, namespace: pulumi.Input[str], server: pulumi.Input[str], path: str, storage: str,
                 match_labels: Mapping[str, str], after: Sequence[pulumi.Resource] = (),
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("tf-mnist:index:SharedVolume", name, None, opts)
        volume_name = f"{name}-data"
        labels = {**recommended_labels(name, "storage"), **match_labels}
        self.pv = k8s.core.v1.PersistentVolume(
            volume_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name, labels=labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": storage},
                access_modes=["ReadWriteMany"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=list(NAS_MOUNT_OPTIONS),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=NAS_CSI_DRIVER,
                    volume_handle=volume_name,
                    # The driver refuses a server containing ':'; the directory goes in path.
                    volume_attributes={"server": server, "path": path},
                ),
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
        self.pv_name = self.pv.metadata.name
        self.pvc_name = self.pvc.metadata.name
        self.register_outputs({"pv_name": self.pv_name, "pvc_name": self.pvc_name})
