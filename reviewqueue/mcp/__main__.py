"""``python -m reviewqueue.mcp [--transport stdio|streamable-http] [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import logging
import sys

from .server import build_server, settings_from_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reviewqueue.mcp",
        description="An MCP server that asks a reviewqueue team for verdicts "
        "(configured by REVIEWQUEUE_URL and REVIEWQUEUE_TOKEN).",
    )
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="Streamable HTTP: the address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="Streamable HTTP: the port to listen on")
    args = parser.parse_args(argv)
    # stderr is the agent's log of this server: one line per HTTP call is noise there.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    server = build_server(settings_from_env())
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
