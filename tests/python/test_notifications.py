"""The error notification gkcd sends before it closes a connection, and the
socket address rules, against a stand-in server so every code can be tried."""
import asyncio
import os
import socket
import tempfile
import threading

import msgpack
import numpy as np
import pytest

import gkc


@pytest.fixture(autouse=True)
def _no_ring(monkeypatch):
    # The stand-in answers each request in turn: the ring_register a
    # connection sends first would take the first answer.  Rings: test_ring.py.
    monkeypatch.setenv("GKC_NO_RING", "1")


class Notifier:
    """A Unix socket server that answers the first request it reads with the
    given messages, then closes, like gkcd refusing or timing out a client."""

    def __init__(self, *messages, wait_for_bytes=True):
        self.dir = tempfile.mkdtemp(prefix="gkc-notify-")
        self.path = os.path.join(self.dir, "s.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(4)
        self.messages, self.wait = messages, wait_for_bytes
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        s, _ = self.srv.accept()
        if self.wait:
            s.recv(65536)
        for m in self.messages:
            s.sendall(msgpack.packb(m, use_bin_type=True))
        s.close()

    def close(self):
        self.t.join(5)
        self.srv.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def note(code, message):
    return [2, "error", [{"code": code, "message": message}]]


@pytest.mark.parametrize("code", ["too_many_connections", "timeout", "device_lost", "busy"])
@pytest.mark.parametrize("early", [False, True])
def test_notification_raises_its_class(code, early):
    n = Notifier(note(code, f"closing: {code} here"), wait_for_bytes=not early)
    try:
        with gkc.connect(n.path, timeout=10) as c:
            with pytest.raises(gkc.ERRORS[code], match=f"closing: {code} here") as e:
                c.ping()
            assert e.value.code == code
            # The connection is over; later calls say so with the same class.
            with pytest.raises(gkc.ERRORS[code]):
                c.ping()
    finally:
        n.close()


def test_unknown_code_keeps_the_code():
    n = Notifier(note("meteor_strike", "a rock"))
    try:
        with gkc.connect(n.path, timeout=10) as c:
            with pytest.raises(gkc.UnknownCode, match="meteor_strike: a rock") as e:
                c.ping()
            assert e.value.code == "meteor_strike"
    finally:
        n.close()


def test_close_without_a_word_is_connection_failed():
    n = Notifier()
    try:
        with gkc.connect(n.path, timeout=10) as c:
            with pytest.raises(gkc.ConnectionFailed, match="closed"):
                c.ping()
    finally:
        n.close()


def test_reply_then_notification():
    # A reply already sent is delivered; the notification ends what follows.
    n = Notifier([1, 0, None, {"protocol": 1}], note("timeout", "too slow"))
    try:
        with gkc.connect(n.path, timeout=10) as c:
            assert c.ping() == {"protocol": 1}
            with pytest.raises(gkc.Timeout, match="too slow"):
                c.ping()
    finally:
        n.close()


def test_aio_notification_fails_every_pending_request():
    n = Notifier(note("too_many_connections", "no slot free (1 of 1)"))

    async def main():
        async with gkc.aio.connect(n.path) as c:
            calls = [c.reduce(np.ones(4, np.float32)) for _ in range(5)]
            res = await asyncio.gather(*calls, return_exceptions=True)
            assert all(isinstance(r, gkc.TooManyConnections) for r in res), res
            assert all(str(r) == "no slot free (1 of 1)" for r in res)
            with pytest.raises(gkc.TooManyConnections):
                await c.ping()
    try:
        asyncio.run(main())
    finally:
        n.close()


def test_connect_error_names_the_path():
    path = os.path.join(tempfile.gettempdir(), "gkc-nobody-listens-here.sock")
    with pytest.raises(gkc.ConnectError, match="gkc-nobody-listens-here"):
        gkc.connect(path)


def test_socket_path_rules(monkeypatch):
    monkeypatch.setenv("GKC_SOCKET", "/a/env.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert gkc.socket_path("/explicit.sock") == "/explicit.sock"
    assert gkc.socket_path() == "/a/env.sock"
    monkeypatch.setenv("GKC_SOCKET", "")  # empty counts as unset, as in libgkc
    assert gkc.socket_path() == "/run/user/7/gkcd.sock"
    monkeypatch.delenv("GKC_SOCKET")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert gkc.socket_path() == "/run/gkcd/gkcd.sock" == gkc.DEFAULT_SOCKET
    with pytest.raises(gkc.InvalidArgument, match="longer"):
        gkc.socket_path("/" + "x" * 200)


def test_env_socket_reaches_the_daemon(gkcd, monkeypatch):
    monkeypatch.setenv("GKC_SOCKET", gkcd.sock)
    with gkc.connect() as c:
        assert c.path == gkcd.sock and c.ping()["protocol"] == 1
