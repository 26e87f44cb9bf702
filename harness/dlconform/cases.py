"""A check's case in a process of its own, forked from the warm parent (issue 22).

Some checks judge how a process ends (an export left alive at the interpreter's exit, a
destructor that may kill the process): they run a case, the reproducer script of a function,
in a child (suites/support/repros.py). A fresh interpreter costs an import of the library
(torch: 1.5 s of CPU); the warm parent (zygote.py) has imported it and used nothing, so a child
forked from it is the process a fresh `python -c SCRIPT` would be once its imports ran. The
child runs the script as `python -c` would (a module `__main__`, sys.argv ["-c"], the
environment the caller gives, its own session) and exits through SystemExit, so the
interpreter finalises as in any Python process.

A pytest child of the zygote holds one end of a socket pair (`use`); `run` sends a request on
it as three file descriptors (the request in JSON, then the files for stdout and stderr) and
reads one line back: `EXIT <returncode>` (negative: the signal) or `EXIT timeout` (the zygote
killed the case's process group at its limit). Outside a zygote's child (pytest run by hand,
a warm parent that did not start) `run` says None and the caller starts a fresh interpreter.
"""
import json
import os
import socket
import tempfile
import threading

#: the pytest child's end of its socket pair with the zygote; None outside a zygote's child
_channel = None
#: one request at a time on the channel (a check may run cases from threads)
_lock = threading.Lock()


def use(channel):
    """In a pytest child of the zygote: the socket its cases are asked for on."""
    global _channel
    _channel = channel


def run(script, env, cwd, timeout):
    """(returncode or None for a timeout, stdout, stderr) of `script` run as `python -c` would,
    with the environment `env` and the working folder `cwd`, in a child of the warm parent;
    None when there is no warm parent to ask (or it is gone)."""
    if _channel is None:
        return None
    files = [tempfile.TemporaryFile() for _ in range(3)]
    try:
        files[0].write(json.dumps({"script": script, "env": env, "cwd": cwd, "timeout": timeout}).encode())
        files[0].flush()
        try:
            with _lock:
                socket.send_fds(_channel, [b"C"], [f.fileno() for f in files])
                _channel.settimeout(timeout + 30.0)  # the zygote kills the case at `timeout`
                line = b""
                while not line.endswith(b"\n"):
                    data = _channel.recv(64)
                    if not data:
                        raise OSError("the warm parent ended")
                    line += data
        except (OSError, AttributeError):  # AttributeError: another thread found the zygote gone
            use(None)
            return None
        word, code = (line.decode().split() + ["", ""])[:2]
        if word != "EXIT":
            use(None)
            return None
        out, err = [read(f) for f in files[1:]]
        return (None if code == "timeout" else int(code)), out, err
    finally:
        for f in files:
            f.close()


def read(f):
    """What a temporary file holds, as text."""
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def take_request(channel):
    """The zygote's side: the request a pytest child sent on `channel` (its script, env, cwd
    and timeout, and in "fds" the descriptors for the case's stdout and stderr), or None at
    EOF (the pytest child ended) or when what came is not a request."""
    try:
        msg, fds, _flags, _addr = socket.recv_fds(channel, 16, 3)
    except OSError:
        return None
    request = None
    if msg == b"C" and len(fds) == 3:
        try:
            with os.fdopen(os.dup(fds[0]), "rb") as f:
                f.seek(0)
                request = json.loads(f.read())
            request["fds"] = fds[1:]
        except (OSError, ValueError):
            request = None
    for fd in fds if request is None else fds[:1]:
        os.close(fd)
    return request
