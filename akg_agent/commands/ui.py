"""`akg ui [--root runs] [--port 1430]`: the local web page over the run directories."""

from __future__ import annotations

import argparse
from pathlib import Path

from ir.errors import AkgError

from ..ui.server import serve


def cmd_ui(args: argparse.Namespace) -> int:
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        raise AkgError(f"--host {args.host} would let other machines reach the page: add --allow-remote to mean it")
    try:
        serve(Path(args.root), args.host, args.port)
    except OSError as e:
        raise AkgError(f"cannot listen on {args.host}:{args.port}: {e.strerror}; pick another --port") from None
    except KeyboardInterrupt:
        pass
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="local web page: runs, plans to approve, attempts and their diffs, bench plots")
    p.add_argument("--root", default="runs", help="the folder of run directories (default runs)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    p.add_argument("--port", type=int, default=1430)
    p.add_argument("--allow-remote", action="store_true", help="allow a --host other than loopback")
    p.set_defaults(fn=cmd_ui)
