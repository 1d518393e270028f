"""Where a webhook may go: public addresses, and the networks the operator lists; never a cloud metadata service.

A webhook is a POST the service sends where an admin says, from inside the service's network. Pointed at loopback
(127.0.0.0/8, ::1) it reaches services that trust only their own host; at private networks (10/8, 172.16/12,
192.168/16, fc00::/7) the internal services beside the database and Redis; at link-local addresses (169.254.0.0/16,
fe80::/10) the instance metadata services of AWS, GCP and Azure at 169.254.169.254 (and AWS's IPv6 fd00:ec2::254,
Alibaba's 100.100.100.200, ECS's 169.254.170.2), which hand out the host's cloud credentials. OWASP's Server-Side
Request Forgery Prevention Cheat Sheet ("Case 2: the application can send requests to any external IP address or
domain name") recommends refusing such destinations both when the URL is accepted and when the request is made,
after name resolution, so that a name that later resolves to one of them (DNS rebinding) is refused too.

So by default only public (globally routable) unicast addresses receive webhooks. ``WEBHOOK_ALLOWED_NETWORKS`` (a
setting: a list of CIDR networks, default none) admits others, e.g. ``["10.20.0.0/16"]`` for an on-premises
receiver or ``["127.0.0.0/8"]`` for one on the same host in development; nothing admits the metadata addresses.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Host names that name this host or a metadata service, whatever they resolve to (unless loopback is allowed).
LOOPBACK_NAMES = ("localhost",)
METADATA_NAMES = ("metadata.google.internal", "metadata.goog", "instance-data")
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254",
                                                                 "100.100.100.200", "169.254.170.2"))


def allowed_networks(values: Iterable[str]) -> tuple[IpNetwork, ...]:
    """Returns the networks of ``WEBHOOK_ALLOWED_NETWORKS``; ValueError for an entry that is not a CIDR network."""
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def refusal(address: IpAddress, allowed: Sequence[IpNetwork] = ()) -> str | None:
    """Returns why a webhook may not be sent to ``address`` (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata service"
    if any(address in network for network in allowed):
        return None
    if address.is_loopback:
        return "loopback (this host)"
    if address.is_link_local:
        return "link-local (the metadata services' range)"
    if address.is_unspecified or address.is_multicast or address.is_reserved:
        return "not a unicast host address"
    if not address.is_global:
        return "a private or non-public network (WEBHOOK_ALLOWED_NETWORKS admits one)"
    return None


def host_refusal(host: str, allowed: Sequence[IpNetwork] = ()) -> str | None:
    """Returns why a URL's host may not receive webhooks, from the host alone (an address or a refused name)."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        return refusal(ipaddress.ip_address(name), allowed)
    except ValueError:
        pass
    if any(name == refused or name.endswith("." + refused) for refused in METADATA_NAMES):
        return f"{name!r} names a metadata service"
    if any(name == refused or name.endswith("." + refused) for refused in LOOPBACK_NAMES):
        return refusal(ipaddress.ip_address("127.0.0.1"), allowed) and f"{name!r} names this host"
    return None


def resolved_refusal(host: str, port: int, allowed: Sequence[IpNetwork] = (),
                     resolve: Callable[..., Iterable[tuple]] = socket.getaddrinfo) -> str | None:
    """Returns why a POST to ``host`` may not be sent now: the host alone, or any address it resolves to."""
    refused = host_refusal(host, allowed)
    if refused is not None:
        return refused
    try:
        found = resolve(host.strip("[]"), port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # the send reports the resolution error itself
    for *_, sockaddr in found:
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        why = refusal(address, allowed)
        if why is not None:
            return f"{host} resolves to {address}, {why}"
    return None
