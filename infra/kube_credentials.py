"""The kubeconfig's credentials for the kubernetes Python client, kept off the disk.

The client's kubeconfig loader writes the CA, the client certificate and the client key it
finds inline (``*-data``) to ``tempfile.mkstemp`` files, removed only at a normal interpreter
exit: a preview or ``up`` killed mid-run would leave a live client key in the temp directory.
``load`` has the loader write them into a fresh private directory (mode 0700), copies each into
an anonymous in-memory file (Linux ``memfd_create``; the client opens it as ``/proc/self/fd/N``,
which lasts exactly as long as this process) and removes the directory before anything
connects: the files exist on disk for the microseconds between the loader's write and the
copy. Where memfd_create is missing (not Linux), the directory stays until the interpreter
exits, as the client's own files would.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

#: The Configuration attributes the loader points at files it wrote.
FILE_ATTRIBUTES = ("ssl_ca_cert", "cert_file", "key_file")


def in_memory_copy(path: Path) -> str:
    """A path, ``/proc/self/fd/N``, of an anonymous in-memory file holding ``path``'s bytes; the
    descriptor stays open for the life of the process (the client reopens it per connection)."""
    fd = os.memfd_create(f"tf-mnist-{path.name}", os.MFD_CLOEXEC)
    os.write(fd, path.read_bytes())
    return f"/proc/self/fd/{fd}"


def load(kubeconfig: str | dict, configuration: Any) -> Any:
    """An ApiClient for the current context of ``kubeconfig`` (a file's path, or its content
    already parsed to a dict), built on ``configuration``; no credential file is left on disk.

    Raises:
        whatever the client's loader raises for a kubeconfig it cannot load.
    """
    from kubernetes import client, config

    private = Path(tempfile.mkdtemp(prefix="tf-mnist-kubeconfig-"))  # 0700, ours alone
    keep = not hasattr(os, "memfd_create")
    try:
        if isinstance(kubeconfig, dict):
            config.load_kube_config_from_dict(
                kubeconfig,
                client_configuration=configuration,
                persist_config=False,
                temp_file_path=str(private),
            )
        else:
            config.load_kube_config(
                config_file=kubeconfig,
                client_configuration=configuration,
                persist_config=False,
                temp_file_path=str(private),
            )
        if not keep:
            for name in FILE_ATTRIBUTES:
                value = getattr(configuration, name, None)
                if value and Path(value).parent == private:
                    setattr(configuration, name, in_memory_copy(Path(value)))
    finally:
        if keep:
            atexit.register(shutil.rmtree, private, True)
        else:
            shutil.rmtree(private, ignore_errors=True)
    return client.ApiClient(configuration)
