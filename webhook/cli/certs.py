"""`gangkeeper certs`: issue (or renew) a CA and a serving certificate into a directory.

For local and CI use: the files are what `gangkeeper serve --cert-dir DIR` serves with and
what `gangkeeper manifests --url ... --ca-bundle DIR/ca.crt` registers. Only touches the
given directory (through `gangkeeper.certs.ensure_local`); no cluster access.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path
from typing import Any

from gangkeeper.policies.names import DEFAULT_NAMESPACE, SERVICE_NAME


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "certs",
        help="issue a CA and serving certificate into a directory",
        description=(
            "Write ca.crt, ca.key, tls.crt and tls.key into DIR, reusing them when they are "
            "still valid for the names and not due for renewal. Without --dns/--ip the "
            "certificate is for the in-cluster Service names plus localhost and 127.0.0.1."
        ),
    )
    parser.add_argument("--dir", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--dns", action="extend", nargs="+", default=[], metavar="NAME", help="DNS SANs"
    )
    parser.add_argument(
        "--ip", action="extend", nargs="+", default=[], metavar="IP", help="IP SANs"
    )
    parser.add_argument(
        "-n", "--namespace", default=DEFAULT_NAMESPACE, help="for the default names"
    )
    parser.add_argument("--service", default=SERVICE_NAME, help="for the default names")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gangkeeper.certs import (
        CertificateError,
        certificate_not_after,
        ensure_local,
        service_dns_names,
    )

    dns: list[str] = list(args.dns)
    ips: list[str] = list(args.ip)
    if not dns and not ips:
        dns = [*service_dns_names(args.service, args.namespace), "localhost"]
        ips = ["127.0.0.1"]
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            print(f"gangkeeper certs: --ip {ip!r} is not an IP address", file=sys.stderr)
            return 2
    try:
        paths = ensure_local(args.dir, dns, ips)
    except CertificateError as exc:
        print(f"gangkeeper certs: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gangkeeper certs: cannot write to {args.dir}: {exc}", file=sys.stderr)
        return 2
    expiry = certificate_not_after(paths.cert).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"ca bundle:   {paths.ca_cert}")
    print(f"certificate: {paths.cert} (expires {expiry}; names: {', '.join(dns + ips)})")
    print(f"key:         {paths.key}")
    return 0
