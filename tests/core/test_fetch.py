"""Tests for studybench.fetch against a local HTTP server laid out like the official repository.

The server serves ``tmp_path/repo`` (``<branch>/eval/data/...``, ``<branch>/train_data/...``), populated
at test time with symlinks to the real test sets and small synthetic instruction files.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from studybench import fetch
from studybench.datasets import load_dataset, resolve_split
from studybench.fetch import TEST_FILES, TRAIN_FILES, FetchError, fetch_official, official_files

BRANCH = "main"
APP = "eval/data/qwen3_8b_textbook_problem.json"
TRANSFER = "eval/data/qwen3_8b_competition_problem.json"


@dataclass
class Behaviour:
    """Per-test server behaviour, keyed by the request path (``/main/eval/data/...``)."""

    drop_once: set[str] = field(default_factory=set)  # close the connection without a response, once
    fail_status: dict[str, int] = field(default_factory=dict)  # answer with this status
    hits: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(SimpleHTTPRequestHandler):
    behaviour: Behaviour  # set on a per-server subclass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        pass

    def do_GET(self) -> None:
        b = self.behaviour
        with b.lock:
            b.hits[self.path] += 1
            drop = self.path in b.drop_once
            b.drop_once.discard(self.path)
        if drop:
            self.close_connection = True
            self.connection.close()
            return
        if self.path in b.fail_status:
            self.send_error(b.fail_status[self.path])
            return
        super().do_GET()


@dataclass
class Server:
    root: Path
    base_url: str
    behaviour: Behaviour

    def path(self, remote: str) -> str:
        return f"/{BRANCH}/{remote}"

    def file(self, remote: str) -> Path:
        return self.root / BRANCH / remote


@pytest.fixture
def server(tmp_path: Path, data_dir: Path) -> Iterator[Server]:
    root = tmp_path / "repo"
    data = root / BRANCH / "eval" / "data"
    data.mkdir(parents=True)
    (data / Path(APP).name).symlink_to(data_dir / "application.json")
    (data / Path(TRANSFER).name).symlink_to(data_dir / "transfer.json")
    train = root / BRANCH / "train_data"
    train.mkdir()
    for i, spec in enumerate(TRAIN_FILES):
        recs = [{"messages": [{"role": "user", "content": f"q{i}"}], "answer": r"\boxed{1}", "answer_type": "NV"}]
        (train / Path(spec.remote).name).write_text(json.dumps(recs), encoding="utf-8")

    behaviour = Behaviour()
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})

    def factory(*args: Any, **kwargs: Any) -> SimpleHTTPRequestHandler:
        return handler(*args, directory=str(root), **kwargs)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), factory)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Server(root, f"http://127.0.0.1:{httpd.server_address[1]}", behaviour)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _fetch(server: Server, dest: Path, **kw: Any) -> list[Path]:
    kw.setdefault("backoff", 0)
    kw.setdefault("timeout", 10)
    return fetch_official(dest, base_url=server.base_url, branch=BRANCH, **kw)


def _leftovers(dest: Path) -> list[Path]:
    return sorted(p for p in dest.rglob("*") if p.is_file())


# --------------------------------------------------------------------------- success paths


def test_fetch_test_sets(server: Server, tmp_path: Path, data_dir: Path) -> None:
    dest = tmp_path / "cache"
    lines: list[str] = []
    paths = _fetch(server, dest, log=lines.append)
    assert paths == [dest / "application.json", dest / "transfer.json"]
    assert (dest / "application.json").read_bytes() == (data_dir / "application.json").read_bytes()
    assert (dest / "transfer.json").read_bytes() == (data_dir / "transfer.json").read_bytes()
    assert _leftovers(dest) == sorted(paths)  # no temporary files left
    assert len(load_dataset(paths[0])) == 88 and load_dataset(paths[1]).n_sub_problems == 280
    assert resolve_split("transfer", dest) == dest / "transfer.json"
    assert sum(line.startswith("fetched") for line in lines) == 2
    assert server.behaviour.hits[server.path(APP)] == 1


def test_fetch_with_train(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    paths = _fetch(server, dest, include_train=True)
    assert paths == [dest / spec.local for spec in official_files(include_train=True)]
    assert [p.relative_to(dest).as_posix() for p in paths[2:]] == [
        "train/verifiable_instr.json", "train/verifiable_instr_multi_subs.json", "train/unverifiable_instr.json",
    ]
    for p in paths:
        assert p.is_file()
    assert json.loads(paths[2].read_text())[0]["messages"][0]["content"] == "q0"


def test_skip_when_present(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    _fetch(server, dest)
    before = {p: p.stat().st_mtime_ns for p in _leftovers(dest)}
    lines: list[str] = []
    paths = _fetch(server, dest, log=lines.append)
    assert paths == [dest / "application.json", dest / "transfer.json"]
    assert server.behaviour.hits[server.path(APP)] == 1  # not requested again
    assert {p: p.stat().st_mtime_ns for p in _leftovers(dest)} == before
    assert all(line.startswith("skip") for line in lines) and len(lines) == 2


def test_force_downloads_again(server: Server, tmp_path: Path, data_dir: Path) -> None:
    dest = tmp_path / "cache"
    dest.mkdir()
    (dest / "application.json").write_text("stale", encoding="utf-8")
    _fetch(server, dest)  # application present (even if stale): skipped, transfer fetched
    assert (dest / "application.json").read_text() == "stale"
    assert server.behaviour.hits[server.path(APP)] == 0
    _fetch(server, dest, force=True)
    assert server.behaviour.hits[server.path(APP)] == 1
    assert server.behaviour.hits[server.path(TRANSFER)] == 2
    assert (dest / "application.json").read_bytes() == (data_dir / "application.json").read_bytes()


def test_default_dest_is_user_cache(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "usercache" / "data"
    monkeypatch.setattr(fetch, "default_cache_dir", lambda: cache)
    paths = fetch_official(base_url=server.base_url, branch=BRANCH, backoff=0, timeout=10)
    assert paths == [cache / "application.json", cache / "transfer.json"]
    assert all(p.is_file() for p in paths)


# --------------------------------------------------------------------------- failures


def test_404_is_a_clear_error_and_leaves_nothing(server: Server, tmp_path: Path) -> None:
    server.file(TRANSFER).unlink()
    dest = tmp_path / "cache"
    with pytest.raises(FetchError) as exc:
        _fetch(server, dest)
    msg = str(exc.value)
    assert server.base_url + server.path(TRANSFER) in msg
    assert "404" in msg
    assert exc.value.status == 404 and exc.value.url.endswith(TRANSFER)
    assert _leftovers(dest) == []  # application was downloaded fine but is not kept either
    assert server.behaviour.hits[server.path(TRANSFER)] == 1  # a 404 is not retried


def test_credentials_in_the_base_url_are_not_shown(server: Server, tmp_path: Path) -> None:
    server.file(TRANSFER).unlink()
    host = server.base_url.split("://", 1)[1]
    with pytest.raises(FetchError) as exc:
        fetch_official(tmp_path / "cache", base_url=f"http://user:pw-Q7xZ2mK9pL4v@{host}", branch=BRANCH, backoff=0, timeout=10)
    assert "404" in str(exc.value) and "pw-Q7xZ2mK9pL4v" not in str(exc.value) + exc.value.url


def test_failed_fetch_keeps_existing_files(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    dest.mkdir()
    (dest / "application.json").write_text("old", encoding="utf-8")
    server.behaviour.fail_status[server.path(TRANSFER)] = 403
    with pytest.raises(FetchError, match="403"):
        _fetch(server, dest, force=True)
    assert _leftovers(dest) == [dest / "application.json"]
    assert (dest / "application.json").read_text() == "old"


def test_corrupted_download_is_rejected(server: Server, tmp_path: Path) -> None:
    target = server.file(APP)
    target.unlink()
    target.write_text('{"data": [{"source": "x", ', encoding="utf-8")  # truncated JSON
    dest = tmp_path / "cache"
    with pytest.raises(FetchError) as exc:
        _fetch(server, dest)
    msg = str(exc.value)
    assert server.path(APP) in msg and "not valid JSON" in msg
    assert ".part" not in msg  # the temp name is replaced by the local name
    assert exc.value.status is None
    assert _leftovers(dest) == []


def test_invalid_test_set_is_rejected(server: Server, tmp_path: Path, data_dir: Path) -> None:
    recs = json.loads((data_dir / "transfer.json").read_text(encoding="utf-8"))[:3]
    recs[1]["sub_problems"][0]["answer_type"] = "XX"
    target = server.file(TRANSFER)
    target.unlink()
    target.write_text(json.dumps(recs), encoding="utf-8")
    dest = tmp_path / "cache"
    with pytest.raises(FetchError) as exc:
        _fetch(server, dest)
    msg = str(exc.value)
    assert "transfer.json: record 1" in msg and "answer_type" in msg
    assert _leftovers(dest) == []


def test_invalid_train_file_is_rejected(server: Server, tmp_path: Path) -> None:
    server.file(TRAIN_FILES[1].remote).write_text('"just a string"', encoding="utf-8")
    dest = tmp_path / "cache"
    with pytest.raises(FetchError, match="list of records"):
        _fetch(server, dest, include_train=True)
    assert _leftovers(dest) == []


def test_dropped_connection_is_retried(server: Server, tmp_path: Path) -> None:
    server.behaviour.drop_once.add(server.path(APP))
    dest = tmp_path / "cache"
    paths = _fetch(server, dest)
    assert server.behaviour.hits[server.path(APP)] == 2
    assert len(load_dataset(paths[0])) == 88
    assert _leftovers(dest) == sorted(paths)


def test_server_error_is_retried_then_reported(server: Server, tmp_path: Path) -> None:
    server.behaviour.fail_status[server.path(APP)] = 503
    dest = tmp_path / "cache"
    with pytest.raises(FetchError) as exc:
        _fetch(server, dest, retries=3)
    assert server.behaviour.hits[server.path(APP)] == 3
    assert "503" in str(exc.value) and "3 attempts" in str(exc.value) and exc.value.status == 503
    assert _leftovers(dest) == []


def test_connection_refused_names_the_url(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dest = tmp_path / "cache"
    with pytest.raises(FetchError) as exc:
        fetch_official(dest, base_url=f"http://127.0.0.1:{port}", retries=2, backoff=0, timeout=5)
    assert f"http://127.0.0.1:{port}/main/{TEST_FILES[0].remote}" in str(exc.value)
    assert "2 attempts" in str(exc.value)
    assert _leftovers(dest) == []
