"""How much of the internet a set of source ranges admits, and the most TensorBoard's may.

TensorBoard has no login, so the ranges in front of its load balancer must name networks, not
the internet. The rule counts addresses, never the text of a range: the ranges' union, less the
blocks no internet host can come from, may hold at most one /8 of public IPv4 addresses
(16,777,216, as many as the largest block one organisation holds) and at most one /32 of public
IPv6 addresses (a regional registry's usual allocation to one provider). So ``0.0.0.0/0`` is
refused, and so are ``0.0.0.0/1`` and ``128.0.0.0/1`` together, ``64.0.0.0/2``, or 200 /8s;
``10.0.0.0/8`` or a company's /16 pass. The settings (infra/settings/rules.py tensorboard) and
the policy pack (policy/rules.py tensorboard_source_ranges) apply this one rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The most public addresses the ranges together may admit, by IP version.
MAX_PUBLIC = {4: 2**24, 6: 2**96}
#: The limit as the messages name it, by IP version.
MAX_PUBLIC_SHOWN = {4: "one /8 (16,777,216 addresses)", 6: "one /32"}
#: Blocks no internet host sends from, by IP version: for IPv4 the IANA special-purpose
#: registry's blocks that are not globally reachable (RFC 6890 and its updates: "this network",
#: private, shared CGN, loopback, link-local, IETF protocol, documentation, benchmarking) and the
#: multicast and reserved space above 224.0.0.0; for IPv6 everything outside global unicast
#: (2000::/3, RFC 4291): unique local, link-local, multicast, loopback and the unassigned rest.
NOT_PUBLIC: dict[int, tuple[Network, ...]] = {
    4: tuple(
        ipaddress.IPv4Network(n)
        for n in (
            "0.0.0.0/8",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.0.0.0/24",
            "192.0.2.0/24",
            "192.168.0.0/16",
            "198.18.0.0/15",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "224.0.0.0/3",
        )
    ),
    6: tuple(ipaddress.IPv6Network(n) for n in ("::/3", "4000::/2", "8000::/1")),
}


def _public(union: Iterable[Network], blocks: tuple[Network, ...]) -> int:
    """How many addresses of ``union`` (disjoint networks) lie outside ``blocks`` (disjoint, and
    of the same IP version, which mypy cannot tell from the types)."""
    total = 0
    for net in union:
        hidden = 0
        for block in blocks:
            if net.subnet_of(block):  # type: ignore[arg-type]
                hidden = net.num_addresses
                break
            if block.subnet_of(net):  # type: ignore[arg-type]
                hidden += block.num_addresses
        total += net.num_addresses - hidden
    return total


def public_addresses(networks: Iterable[Network]) -> dict[int, int]:
    """IP version -> how many public addresses (outside NOT_PUBLIC) the union of ``networks``
    holds; a range counted once however often it is listed or overlapped."""
    listed = list(networks)
    v4 = ipaddress.collapse_addresses(n for n in listed if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in listed if isinstance(n, ipaddress.IPv6Network))
    return {4: _public(v4, NOT_PUBLIC[4]), 6: _public(v6, NOT_PUBLIC[6])}


def too_wide(ranges: Iterable[str]) -> str | None:
    """Why ``ranges`` (CIDR strings; ones that are not a CIDR are left out) admit too much of the
    internet, for a message: e.g. "together admit 3,702,258,432 public IPv4 addresses (every
    one), more than one /8 (16,777,216 addresses)"; None when they pass."""
    networks: list[Network] = []
    for text in ranges:
        try:
            networks.append(ipaddress.ip_network(str(text).strip(), strict=False))
        except ValueError:
            continue
    counts = public_addresses(networks)
    everything = public_addresses([ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")])
    for version, count in counts.items():
        if count > MAX_PUBLIC[version]:
            every = " (every one)" if count == everything[version] else ""
            return (
                f"together admit {count:,} public IPv{version} addresses{every}, more than "
                f"{MAX_PUBLIC_SHOWN[version]}"
            )
    return None
