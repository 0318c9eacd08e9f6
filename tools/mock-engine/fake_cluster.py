"""A recorded cluster that the program reads under the mock engine
(tools/mock-engine/program_mocks.py run_program's ``cluster``): the ownership check's objects
and the monitor egress' ports."""

from __future__ import annotations


class FakeCluster:
    """A recorded cluster for the ownership check, the monitor's egress and Terway's policy
    setting: ``objects`` it holds, ``api_ports`` its kubernetes Service's endpoint ports or what
    reading them raises, ``config_maps`` (namespace, name) -> data or what reading it raises,
    ``error`` what every read raises; ``reads`` the refs asked for, ``port_reads`` the reads of
    the ports."""

    def __init__(
        self,
        objects: dict | None = None,
        error: Exception | None = None,
        api_ports=(6443,),
        config_maps: dict | None = None,
    ) -> None:
        self.objects, self.error, self.api_ports = dict(objects or {}), error, api_ports
        self.config_maps = dict(config_maps or {})
        self.reads, self.port_reads = [], 0

    def read(self, ref):
        self.reads.append(ref)
        if self.error is not None:
            raise self.error
        return self.objects.get(ref)

    def api_server_ports(self) -> list[int]:
        self.port_reads += 1
        for error in (self.error, self.api_ports):
            if isinstance(error, Exception):
                raise error
        return list(self.api_ports)

    def config_map_data(self, namespace: str, name: str):
        if self.error is not None:
            raise self.error
        found = self.config_maps.get((namespace, name))
        if isinstance(found, Exception):
            raise found
        return found
