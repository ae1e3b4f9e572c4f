"""Run many ``studybench`` command lines in one child process (tests/cli/test_run_files_hostile.py).

Reads ``{"cases": [[id, [arg, ...]], ...], "case_timeout": seconds}`` as JSON on stdin; runs each
command line in process (``click.testing.CliRunner`` on the command built once) under ``signal.alarm``, so that a command that
blocks (on a named pipe) is interrupted and recorded instead of hanging the child; writes one JSON
line per case to stdout: ``{"id", "exit_code", "output", "exception", "seconds"}``. The parent runs
this module as a subprocess with a timeout and an address-space limit: a hang that the alarm cannot
break, or a read without bound, still ends the child, never the test session.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("the command blocked (interrupted by the test's alarm)")


def main() -> None:
    import typer
    from click.testing import CliRunner

    from studybench.cli import app

    command = typer.main.get_command(app)  # built once: typer's CliRunner rebuilds it for every call (0.3 s)
    spec = json.load(sys.stdin)
    signal.signal(signal.SIGALRM, _alarm)
    for case_id, args in spec["cases"]:
        print(json.dumps({"id": case_id, "started": True}), file=sys.stderr, flush=True)
        t0 = time.monotonic()
        signal.alarm(int(spec.get("case_timeout", 60)))
        try:
            res = CliRunner().invoke(command, [str(a) for a in args], prog_name="studybench")
        finally:
            signal.alarm(0)
        exc = res.exception
        print(json.dumps({
            "id": case_id,
            "exit_code": res.exit_code,
            "output": res.output,
            "exception": None if exc is None or isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"[:2000],
            "seconds": round(time.monotonic() - t0, 3),
        }), flush=True)


if __name__ == "__main__":
    main()
