"""Where a webhook may not go: the service's own host and the addresses that reach a cloud's metadata service.

A webhook is a POST the service sends where an admin says. Pointed at loopback (127.0.0.0/8, ::1), it reaches
services that trust only their own host; pointed at link-local addresses (169.254.0.0/16, fe80::/10) it reaches
the instance metadata services of AWS, GCP and Azure at 169.254.169.254 (and AWS's IPv6 fd00:ec2::254, Alibaba's
100.100.100.200), which hand out the host's cloud credentials. OWASP's Server-Side Request Forgery Prevention
Cheat Sheet ("Case 2: the application can send requests to any external IP address or domain name") recommends
refusing such destinations both when the URL is accepted and when the request is made, after name resolution, so
that a name that later resolves to one of them (DNS rebinding) is refused too. Private networks (10/8, 172.16/12,
192.168/16, fc00::/7) stay allowed: an on-premises receiver lives there.

``WEBHOOK_ALLOW_LOOPBACK`` (a setting, default false) lets loopback through, for a receiver on the same host in
development and tests; nothing lets the metadata addresses through.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Host names that name this host or a metadata service whatever they resolve to.
REFUSED_NAMES = ("localhost", "metadata.google.internal", "metadata.goog", "instance-data")
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254",
                                                                 "100.100.100.200", "169.254.170.2"))


def refusal(address: IpAddress, allow_loopback: bool) -> str | None:
    """Returns why a webhook may not be sent to ``address`` (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata service"
    if address.is_loopback:
        return None if allow_loopback else "loopback (this host)"
    if address.is_link_local:
        return "link-local (the metadata services' range)"
    if address.is_unspecified or address.is_multicast or address.is_reserved:
        return "not a unicast host address"
    return None


def host_refusal(host: str, allow_loopback: bool) -> str | None:
    """Returns why a URL's host may not receive webhooks, from the host alone (an address or a refused name)."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        return refusal(ipaddress.ip_address(name), allow_loopback)
    except ValueError:
        pass
    if any(name == refused or name.endswith("." + refused) for refused in REFUSED_NAMES):
        return None if allow_loopback and (name == "localhost" or name.endswith(".localhost")) else \
            f"{name!r} names this host or a metadata service"
    return None


def resolved_refusal(host: str, port: int, allow_loopback: bool,
                     resolve: Callable[..., Iterable[tuple]] = socket.getaddrinfo) -> str | None:
    """Returns why a POST to ``host`` may not be sent now: the host alone, or any address it resolves to."""
    refused = host_refusal(host, allow_loopback)
    if refused is not None:
        return refused
    try:
        found = resolve(host.strip("[]"), port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # the send reports the resolution error itself
    for *_, sockaddr in found:
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        why = refusal(address, allow_loopback)
        if why is not None:
            return f"{host} resolves to {address}, {why}"
    return None
