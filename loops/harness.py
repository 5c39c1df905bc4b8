"""The two programs of a demand red line, and the wire between them.

Standard library only: this file's source is what runs inside the sandboxes
(``python -I -S -c <this source> candidate|checks``), never the project.

* ``candidate``: runs the candidate's code and answers requests about it.
  Everything it says is untrusted; it can lie, crash or hang, and that only
  hurts its own verdict.
* ``checks``: runs the hidden checks in a namespace where the candidate's
  top-level names are proxies. A call sends its arguments as plain data and
  gets plain data back, so no object the candidate made (a rigged ``__eq__``,
  a lying ``__bool__``) ever takes part in a check. The verdict leaves on this
  process's stdout, which the candidate's process has no handle on.

Wire: each frame is a 4-byte big-endian length and one tagged value, decoded
by :func:`decode` into exact builtins only: ``N T F`` None/True/False, ``i``
int (two's complement), ``f`` float (IEEE double, nan and inf included),
``s`` str (UTF-8, surrogates kept), ``b`` bytes, ``l t S z`` list, tuple,
set, frozenset and ``d`` dict (a count, then items), ``h`` an opaque handle
on a candidate object. Lengths are checked against the frame, so a hostile
frame cannot make the reader allocate more than the frame holds. The format
needs neither json nor re, which keeps each sandbox's start-up lean.
"""

# This file is the sandboxed side: it must catch everything the candidate or a
# check can raise (BaseException included) and exec code it was sent.
# ruff: noqa: BLE001, S102, S110

from __future__ import annotations

import builtins
import io
import os
import struct
import sys

# Already loaded by os at start-up, unlike typing or collections.abc (which
# would cost a sandbox several milliseconds to import).
from _collections_abc import Callable, Iterator

Encoder = Callable[[object], tuple[int, bool]]  # an object -> (handle id, callable?)
Decoder = Callable[[int, bool], object]  # (handle id, callable?) -> what it becomes here

MAX_FRAME = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_MESSAGE = 200
MAX_LOG = 4000
MAX_PROGRAM_OUTPUT = 1024 * 1024
REQUEST_FD = 3  # checks -> candidate
REPLY_FD = 4  # candidate -> checks


class ProtocolError(Exception):
    """A frame or value from the other side broke the wire format."""


class CandidateExited(Exception):
    """The candidate's process ended or closed its end of the wire."""


# -- framing and values -------------------------------------------------------


def write_frame(fd: int, value: object, handle: Encoder | None = None) -> None:
    data = encode(value, handle)
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise CandidateExited("the other process closed the wire")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, handle: Decoder | None = None) -> object:
    size = int.from_bytes(_read_exact(fd, 4), "big")
    if size > MAX_FRAME:
        raise ProtocolError("frame too large")
    return decode(_read_exact(fd, size), handle)


_DOUBLE = struct.Struct(">d")
_CONTAINERS = {list: b"l", tuple: b"t", set: b"S", frozenset: b"z"}
_BUILD = {ord("l"): list, ord("t"): tuple, ord("S"): set, ord("z"): frozenset}


def encode(value: object, handle: Encoder | None = None) -> bytes:
    """Plain data as bytes. Subclasses of builtins go as their base value,
    read through the base type's own methods so no override runs. Anything
    else becomes ``handle(value)`` (an int id) when given, else TypeError."""
    out = []
    _encode(value, handle, out, 0)
    return b"".join(out)


def _length(n: int) -> bytes:
    return n.to_bytes(4, "big")


def _encode(value: object, handle: Encoder | None, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if value is None:
        out.append(b"N")
    elif value is True:
        out.append(b"T")
    elif value is False:
        out.append(b"F")
    elif isinstance(value, int):
        n = int.__int__(value)
        data = n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)
        out += (b"i", _length(len(data)), data)
    elif isinstance(value, float):
        out += (b"f", _DOUBLE.pack(float.__float__(value)))
    elif isinstance(value, str):
        data = str.__str__(value).encode("utf-8", "surrogatepass")
        out += (b"s", _length(len(data)), data)
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(memoryview(value))
        out += (b"b", _length(len(data)), data)
    elif isinstance(value, dict):
        items = list(dict.items(value))
        out += (b"d", _length(len(items)))
        for key, item in items:
            _encode(key, handle, out, depth + 1)
            _encode(item, handle, out, depth + 1)
    else:
        for kind, tag in _CONTAINERS.items():
            if isinstance(value, kind):
                items = list(kind.__iter__(value))
                out += (tag, _length(len(items)))
                for item in items:
                    _encode(item, handle, out, depth + 1)
                return
        if handle is None:
            raise TypeError(f"cannot send a {type(value).__name__} to the candidate: only plain data")
        ref, is_callable = handle(value)
        out += (b"h", _length(ref), b"\1" if is_callable else b"\0")


def decode(data: bytes, handle: Decoder | None = None) -> object:
    """Bytes back to exact builtins; anything off the format, or trailing
    bytes, is a ProtocolError. ``handle(id, callable)`` makes what a handle
    becomes; without it a handle is a ProtocolError."""
    try:
        value, end = _decode(data, 0, handle, 0)
    except (ValueError, TypeError, IndexError, OverflowError, RecursionError, struct.error) as exc:
        raise ProtocolError(f"malformed value: {type(exc).__name__}") from None
    if end != len(data):
        raise ProtocolError("trailing bytes")
    return value


def _take(data: bytes, pos: int, n: int) -> tuple[bytes, int]:
    if n > len(data) - pos:
        raise ProtocolError("length past the end of the frame")
    return data[pos : pos + n], pos + n


def _decode(data: bytes, pos: int, handle: Decoder | None, depth: int) -> tuple[object, int]:
    if depth > MAX_DEPTH:
        raise ProtocolError("value nested too deeply")
    tag = data[pos]
    pos += 1
    if tag == 78:  # N
        return None, pos
    if tag == 84:  # T
        return True, pos
    if tag == 70:  # F
        return False, pos
    if tag == 102:  # f
        raw, pos = _take(data, pos, 8)
        return _DOUBLE.unpack(raw)[0], pos
    if tag == 104:  # h
        raw, pos = _take(data, pos, 5)
        if handle is None or raw[4] > 1:
            raise ProtocolError("unexpected handle")
        return handle(int.from_bytes(raw[:4], "big"), raw[4] == 1), pos
    raw, pos = _take(data, pos, 4)
    n = int.from_bytes(raw, "big")
    if tag == 105:  # i
        raw, pos = _take(data, pos, n)
        return int.from_bytes(raw, "big", signed=True), pos
    if tag == 115:  # s
        raw, pos = _take(data, pos, n)
        return raw.decode("utf-8", "surrogatepass"), pos
    if tag == 98:  # b
        raw, pos = _take(data, pos, n)
        return bytes(raw), pos
    if n > len(data) - pos:  # every item takes at least one byte
        raise ProtocolError("count past the end of the frame")
    if tag == 100:  # d
        out = {}
        for _ in range(n):
            key, pos = _decode(data, pos, handle, depth + 1)
            out[key], pos = _decode(data, pos, handle, depth + 1)
        return out, pos
    build = _BUILD.get(tag)
    if build is None:
        raise ProtocolError("unknown tag")
    items = []
    for _ in range(n):
        item, pos = _decode(data, pos, handle, depth + 1)
        items.append(item)
    return build(items), pos


def exception_name(name: object) -> str:
    """A class name from the other side, or a neutral one if it is not a plain identifier."""
    if type(name) is str and 0 < len(name) <= 100 and name.isidentifier() and name.isascii():
        return name
    return "CandidateError"


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:MAX_MESSAGE]
    except BaseException:
        return ""


# -- the candidate's side ----------------------------------------------------


def candidate_main() -> None:
    """Read the candidate's source from stdin, then answer requests until the
    wire closes. Nothing here is trusted by the other side."""
    source = sys.stdin.buffer.read().decode("utf-8", "replace")
    _workdir.append(os.getcwd())
    log = io.StringIO()
    # The candidate's prints are its log (hints are redacted); the wire uses
    # raw fds, so rebinding sys.stdout cannot reach it.
    sys.stdout = sys.stderr = log
    sys.stdin = io.StringIO("")
    objects = []

    def handle(obj: object) -> tuple[int, bool]:
        objects.append(obj)
        return len(objects) - 1, callable(obj)

    def lookup(ref: int, is_callable: bool) -> object:
        return objects[ref]

    def load() -> dict[str, object]:
        del objects[:]
        namespace = {"__name__": "candidate"}
        exec(compile(source, "candidate.py", "exec"), namespace)
        return {name: value for name, value in namespace.items() if not name.startswith("__")}

    ops = {
        "load": lambda: load(),
        "call": lambda obj, args, kwargs: obj(*args, **kwargs),
        "getattr": getattr,
        "setattr": setattr,
        "getitem": lambda obj, key: obj[key],
        "setitem": lambda obj, key, value: obj.__setitem__(key, value),
        "len": len,
        "iter": iter,
        "next": next,
        "contains": lambda obj, value: value in obj,
        "repr": repr,
        "str": str,
        "program": lambda stdin_text: run_program(source, stdin_text, log),
        "log": lambda: log.getvalue()[-MAX_LOG:],
    }
    while True:
        try:
            request = read_frame(REQUEST_FD, lookup)
        except (CandidateExited, ProtocolError):
            return
        try:
            op, *args = request
            if op not in ("load", "program", "log"):
                args[0] = objects[args[0]]
            reply = encode(("ok", ops[op](*args)), handle)
        except BaseException as exc:  # the candidate's own failure, reported by class
            message = "" if isinstance(exc, AssertionError) else _message(exc)
            reply = encode(("exc", type(exc).__name__, message))
        data = memoryview(len(reply).to_bytes(4, "big") + reply)
        while data:
            data = data[os.write(REPLY_FD, data) :]


_programs: list[None] = []  # one entry per program run, for unique file names
_workdir: list[str] = []  # set once, before any candidate code runs


def run_program(source: str, stdin_text: str, log: io.StringIO) -> dict[str, object]:
    """Run the candidate as ``__main__`` in a forked child with ``stdin_text``
    on fd 0. Its exit status is the kernel's and its stdout is read here; its
    stderr and the class of what it raised go through files in the private
    /tmp, so a chatty stderr cannot block it while stdout is read."""
    _programs.append(None)
    # The work folder: the sandbox's private /tmp, or a fresh temporary
    # folder of this run's own without the sandbox.
    base = os.path.join(_workdir[0], f"program-{len(_programs)}")
    with open(base + ".in", "w", encoding="utf-8") as handle:
        handle.write(stdin_text)
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _program_child(source, base, out_r, out_w)
    os.close(out_w)
    out = _drain(out_r, MAX_PROGRAM_OUTPUT)
    _, wait_status = os.waitpid(pid, 0)
    error = message = ""
    try:
        with open(base + ".err", encoding="utf-8", errors="replace") as handle:
            log.write(handle.read()[-MAX_LOG:])
        with open(base + ".exc", encoding="utf-8", errors="replace") as handle:
            error, _, message = handle.read().partition("\0")
    except OSError:
        pass
    for suffix in (".in", ".err", ".exc"):
        try:
            os.unlink(base + suffix)
        except OSError:
            pass
    return {
        "status": os.waitstatus_to_exitcode(wait_status),
        "stdout": out.decode("utf-8", "replace"),
        "error": error[:100],
        "message": message[:MAX_MESSAGE],
    }


def _program_child(source: str, base: str, out_r: int, out_w: int) -> None:
    try:
        os.close(REQUEST_FD)
        os.close(REPLY_FD)
        os.close(out_r)
        os.dup2(os.open(base + ".in", os.O_RDONLY), 0)
        os.dup2(out_w, 1)
        os.dup2(os.open(base + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
    except BaseException:
        os._exit(125)
    status, error, message = 0, "", ""
    try:
        exec(compile(source, "candidate.py", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code & 0xFF
        else:
            status = 1
        error = "SystemExit" if status else ""
    except BaseException as exc:
        status, error = 1, type(exc).__name__
        if not isinstance(exc, AssertionError):
            message = _message(exc)
    try:
        sys.stdout.flush()
    except BaseException:
        status = status or 120
    try:
        with open(base + ".exc", "w", encoding="utf-8") as handle:
            handle.write(error + "\0" + message)
    except BaseException:
        pass
    os._exit(status)


def _drain(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if size < limit:
            chunks.append(chunk[: limit - size])
        size += len(chunk)
    os.close(fd)
    return b"".join(chunks)


# -- the checks' side ----------------------------------------------------------


def checks_main() -> None:
    """Read the checks from stdin, run each against the candidate over the
    wire, and write the verdict to stdout; nothing else is written there."""
    checks = decode(sys.stdin.buffer.read())
    verdict_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    wire = Wire()
    results = []
    for check_id, code, stdin_text, expected in checks:
        error, message = None, ""
        sys.stdout = sys.stderr = io.StringIO()  # a check's prints go nowhere
        try:
            if code is not None:
                # A candidate's name never hides a builtin from a check: a
                # top-level `list = lambda it: [1, 2]` must not answer for list().
                names = {k: v for k, v in wire.load().items() if not hasattr(builtins, k)}
                namespace = {"__name__": "__check__", **names}
                exec(compile(code, "<check>", "exec"), namespace)
            else:
                error, message = wire.program(stdin_text or "", expected)
        except BaseException as exc:
            error = type(exc).__name__
            if not isinstance(exc, AssertionError):
                message = _message(exc)
        results.append((check_id, error, message))
    write_frame(verdict_fd, ("verdict", results, wire.log()))


_REMOTE_ERRORS = {}


def remote_error(name: object, message: object) -> Exception:
    """The candidate's exception, raised here under its class name. A name of
    a builtin Exception subclass derives from it, so ``except ValueError``
    in a check still works; anything else derives from Exception only."""
    name = exception_name(name)
    cls = _REMOTE_ERRORS.get(name)
    if cls is None:
        base = getattr(builtins, name, None)
        bases = (base,) if isinstance(base, type) and issubclass(base, Exception) else (Exception,)
        cls = type(name, bases, {"__module__": "candidate"})
        _REMOTE_ERRORS[name] = cls
    return cls(message[:MAX_MESSAGE] if type(message) is str else "")


class Wire:
    """The checks' end of the wire. Once broken (the candidate died or sent
    garbage) it stays broken, and every later request fails the same way."""

    def __init__(self) -> None:
        self.broken: Exception | None = None

    def request(self, *request: object) -> object:
        if self.broken is not None:
            raise self.broken
        try:
            write_frame(REQUEST_FD, request, _ref)
            reply = read_frame(REPLY_FD, self.proxy)
        except (CandidateExited, OSError):
            self.broken = CandidateExited("the candidate's process ended")
            raise self.broken from None
        except ProtocolError as exc:
            self.broken = exc
            raise
        if type(reply) is tuple and len(reply) == 3 and reply[0] == "exc":
            raise remote_error(reply[1], reply[2])
        if type(reply) is not tuple or len(reply) != 2 or reply[0] != "ok":
            self.broken = ProtocolError("malformed reply")
            raise self.broken
        return reply[1]

    def proxy(self, ref: int, is_callable: bool) -> Handle:
        return (CallableHandle if is_callable else Handle)(self, ref)

    def load(self) -> dict[str, object]:
        names = self.request("load")
        if type(names) is not dict or not all(type(k) is str and k.isidentifier() for k in names):
            self.broken = ProtocolError("malformed names")
            raise self.broken
        return names

    def program(self, stdin_text: str, expected: str) -> tuple[str | None, str]:
        """(error class, message) of one stdin/stdout case; (None, "") is a pass:
        exit status 0 and the expected output, trailing whitespace aside."""
        reply = self.request("program", stdin_text)
        if (
            type(reply) is not dict
            or type(reply.get("status")) is not int
            or type(reply.get("stdout")) is not str
            or type(reply.get("error")) is not str
            or type(reply.get("message")) is not str
        ):
            raise ProtocolError("malformed program result")
        if reply["status"] != 0:
            name = reply["error"] or ("ResourceLimit" if reply["status"] < 0 else "SystemExit")
            return exception_name(name), reply["message"][:MAX_MESSAGE]
        if reply["stdout"].rstrip().splitlines() != expected.rstrip().splitlines():
            return "AssertionError", ""
        return None, ""

    def log(self) -> str:
        try:
            text = self.request("log")
        except Exception:
            return ""
        return text[-MAX_LOG:] if type(text) is str else ""


def _typed(value: object, kind: type) -> object:
    if type(value) is not kind:
        raise ProtocolError(f"expected {kind.__name__}")
    return value


class Handle:
    """A candidate object that is not plain data. Its methods, attributes,
    items, length and iteration are asked for over the wire, and what comes
    back is plain data or another handle. It never decides a comparison or a
    truth test: ``==`` is identity, ``bool()`` and ordering raise TypeError."""

    __slots__ = ("_ref", "_wire")

    def __init__(self, wire: Wire, ref: int) -> None:
        object.__setattr__(self, "_wire", wire)
        object.__setattr__(self, "_ref", ref)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._wire.request("getattr", self._ref, name)

    def __setattr__(self, name: str, value: object) -> None:
        self._wire.request("setattr", self._ref, name, value)

    def __getitem__(self, key: object) -> object:
        return self._wire.request("getitem", self._ref, key)

    def __setitem__(self, key: object, value: object) -> None:
        self._wire.request("setitem", self._ref, key, value)

    def __len__(self) -> int:
        return _typed(self._wire.request("len", self._ref), int)

    def __contains__(self, value: object) -> bool:
        return _typed(self._wire.request("contains", self._ref, value), bool)

    def __iter__(self) -> Iterator[object]:
        iterator = self._wire.request("iter", self._ref)
        if not isinstance(iterator, Handle):
            yield from iterator
            return
        while True:
            try:
                item = self._wire.request("next", iterator._ref)
            except StopIteration:
                return
            yield item

    def __next__(self) -> object:
        return self._wire.request("next", self._ref)

    def __repr__(self) -> str:
        return _typed(self._wire.request("repr", self._ref), str)

    def __str__(self) -> str:
        return _typed(self._wire.request("str", self._ref), str)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("a candidate object has no truth value here: compare plain values")


class CallableHandle(Handle):
    __slots__ = ()

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._wire.request("call", self._ref, list(args), kwargs)


def _ref(value: object) -> tuple[int, bool]:
    if isinstance(value, Handle):
        return object.__getattribute__(value, "_ref"), isinstance(value, CallableHandle)
    raise TypeError(f"cannot send a {type(value).__name__} to the candidate: only plain data")


def main(role: str) -> None:
    if role == "candidate":
        candidate_main()
    elif role == "checks":
        checks_main()
    else:
        raise SystemExit(f"unknown role {role!r}")
