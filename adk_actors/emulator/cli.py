"""Command-line entry of the emulator: ``python -m adk_actors.emulator`` (also used by ``adk emulator``)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from adk_actors.errors import ConfigError

from .server import Emulator


def build_parser(prog: str = "python -m adk_actors.emulator") -> argparse.ArgumentParser:
    """The argument parser (exposed so a parent CLI can embed it)."""
    p = argparse.ArgumentParser(prog=prog, description="Local Gemini Developer API (v1beta) emulator.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port to bind; 0 picks a free one (default 8765)")
    p.add_argument("--script", help="scenario script (JSON); default: the built-in demo scenario")
    p.add_argument("--latency-ms", type=int, default=0, help="latency added to every request")
    p.add_argument("--record", help="append proxied exchanges to this JSON-lines file (needs --upstream)")
    p.add_argument("--upstream", help="Gemini-compatible base URL to proxy to when recording")
    p.add_argument("--replay", help="serve exchanges recorded in this JSON-lines file")
    p.add_argument("--api-key", action="append", dest="api_keys", help="accepted API key (repeatable; default: any)")
    p.add_argument("--lax-signatures", action="store_true", help="do not enforce thought signatures (Gemini 2.5 mode)")
    p.add_argument("--strict", action="store_true", help="also enforce rules not verified against the real service")
    p.add_argument("--min-cache-tokens", type=int, default=1024, help="minimum cachedContents size in tokens")
    p.add_argument("--live-port", type=int, default=0, help="Live ws:// port (default 0: a free one)")
    p.add_argument("--live-tls-port", type=int, default=0, help="Live wss:// port (default 0: a free one)")
    p.add_argument("--no-live", action="store_true", help="do not serve the Live (WebSocket) endpoint")
    return p


def _live_line(emu: Emulator) -> str:
    try:
        secure = f" and {emu.live_tls_url} (CA file: {emu.live_ca_file})"
    except ConfigError as exc:
        secure = f" (no wss: {exc.message})"
    return f"Gemini Live listening on {emu.live_url}{secure}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the emulator until SIGINT/SIGTERM; returns the process exit code."""
    args = build_parser().parse_args(argv)
    if (args.record is None) != (args.upstream is None):
        print("error: --record and --upstream must be given together", file=sys.stderr)
        return 2
    try:
        emu = Emulator(
            script=args.script,
            host=args.host,
            port=args.port,
            latency_ms=args.latency_ms,
            api_keys=args.api_keys,
            strict_signatures=not args.lax_signatures,
            record=args.record,
            upstream=args.upstream,
            replay=args.replay,
            min_cache_tokens=args.min_cache_tokens,
            strict=args.strict,
            live=not args.no_live,
            live_port=args.live_port,
            live_tls_port=args.live_tls_port,
        )
        emu.start()
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"Gemini emulator listening on {emu.base_url}", flush=True)
        if not args.no_live:
            print(_live_line(emu), flush=True)
        while not done.wait(1.0):
            pass
    finally:
        emu.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("Gemini emulator stopped", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
