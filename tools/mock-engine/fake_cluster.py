"""A recorded cluster that the program reads under the mock engine
(tools/mock-engine/program_mocks.py run_program's ``cluster``): the ownership check's objects
and the monitor egress' ports."""

from __future__ import annotations


class FakeCluster:
    """A recorded cluster for the ownership check and the monitor's egress: ``objects`` it holds,
    ``api_ports`` its kubernetes Service's endpoint ports or what reading them raises, ``error``
    what every read raises; ``reads`` the refs asked for, ``port_reads`` the reads of the ports."""

    def __init__(
        self, objects: dict | None = None, error: Exception | None = None, api_ports=(6443,)
    ) -> None:
        self.objects, self.error, self.api_ports = dict(objects or {}), error, api_ports
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
