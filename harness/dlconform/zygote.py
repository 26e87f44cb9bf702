"""The runner's warm parent (issue 22): a process that has imported pytest, hypothesis, the
plugin and the library once, and forks a pytest child for each attempt of a target's run.

A child that dies (a crash, a kill at a time limit) then costs a fork and a collection, not an
interpreter and an import of the library: torch 1.13 dies on 20 checks, and each death used to
cost a fresh interpreter that imported torch again.

The fork happens before any check ran: the library has been imported, not used, so it has
started no threads and holds no device. The suites' modules are imported too, by a pytest
session that only collects (`--collect`: that session's arguments), so that a child's
collection finds them in sys.modules, rewritten as pytest rewrites them, instead of importing
and rewriting every test file again after each death. That session reads no target and runs no
check; pytest undoes what it set up (its import hook, faulthandler) when it ends.

Each child starts its own session (its process group is its pid, which the runner kills on a
limit), points fds 0, 1 and 2 where the runner says, and runs pytest.main in the same way
`python -m pytest` would; it exits through SystemExit, so the interpreter's exit runs as in any
Python process (checks and crashes at exit stay visible).

Command line: `python -m dlconform.zygote [--collect JSON-LIST] [--probe SPEC] [MODULE]`.

Protocol, one line each way (the runner's side is runner._Zygote):
- zygote -> runner, once with --probe: `PROBE {"rc", "out", "err"}`, how the target's probe
  ended in a child forked once MODULE was imported (the runner's probe then costs no import);
- zygote -> runner, once: `READY` after the imports;
- runner -> zygote: a JSON object {"args": pytest arguments, "out": path, "err": path};
- zygote -> runner: `PID <pid>` once forked (before it reads the next request), then, when
  the child has ended, `EXIT <pid> <returncode>` (negative: killed by that signal, as
  subprocess says). Several children may run at once: the EXIT lines come in the order the
  children end.
EOF on stdin ends the zygote.
"""
import builtins
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import types

from dlconform import cases


def _child(request, channel, others):
    """In the forked child: the runner's session, fds and pytest, as `python -m pytest`.
    `channel`: its end of the socket pair its checks ask for cases on (cases.py); `others`:
    the zygote's sockets, none of them this child's business."""
    os.setsid()
    for sock in others:
        sock.close()
    _fds(os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
         os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    import pytest

    cases.use(channel)
    sys.argv = ["pytest", *request["args"]]
    raise SystemExit(pytest.main(list(request["args"])))


def _fds(out, err):
    """fd 0 on /dev/null, 1 and 2 on `out` and `err` (closed then)."""
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)


def _case(request, others):
    """In a child forked for a case (cases.py): the request's script run as `python -c SCRIPT`
    would run it, stdout and stderr on the request's two fds. An exception the
    script lets escape is printed as the interpreter prints it, without the zygote's frames,
    and the exit status is 1; the interpreter finalises as it would after `python -c`."""
    os.setsid()
    for sock in others:
        sock.close()
    _fds(*request["fds"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = ["-c"]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    try:
        exec(compile(request["script"], "<string>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: B902 -- as the interpreter reports an uncaught exception
        e.__traceback__ = e.__traceback__.tb_next  # from the script's first frame on
        sys.excepthook(type(e), e, e.__traceback__)
        raise SystemExit(1)
    raise SystemExit(0)


def _say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _collect(args):
    """Runs a pytest session that only collects (`args` plus --collect-only), its output
    discarded: stdout is the runner's channel. What fails here (a test file that does not
    import) is left to the children, which report it as they always did."""
    import pytest

    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        pytest.main([*args, "--collect-only"])
    except BaseException:  # noqa: B902 -- SystemExit included: the warm parent goes on
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


def _probe(spec):
    """The target's probe (targets/loader.py: what `python -m dlconform.targets.loader SPEC`
    prints) in a forked child, the library imported already: one line to the runner,
    `PROBE {"rc", "out", "err"}`. The zygote waits for it: the runner needs the answer before
    any child of this zygote runs."""
    import tempfile

    files = [tempfile.TemporaryFile() for _ in range(2)]
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # in the zygote's process group: a kill of the zygote at its limit takes it too
        _fds(os.dup(files[0].fileno()), os.dup(files[1].fileno()))
        from dlconform.targets import loader

        raise SystemExit(loader.main([spec]))
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    out, err = [cases.read(f) for f in files]
    for f in files:
        f.close()
    _say("PROBE " + json.dumps({"rc": code, "out": out, "err": err[-8000:]}))


def main(argv):
    # what every child imports anyway, and the library (MODULE, optional): an import that
    # fails here is left to the child, which reports it as the runner always did
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    from . import pytest_plugin  # noqa: F401

    collect = probe = None
    if argv[:1] == ["--collect"]:
        collect, argv = json.loads(argv[1]), argv[2:]
    if argv[:1] == ["--probe"]:
        probe, argv = argv[1], argv[2:]
    for name in argv[:1]:
        try:
            importlib.import_module(name)
        except Exception:  # the child's own import says what is wrong
            pass
    if probe is not None:
        _probe(probe)
    if collect is not None:
        _collect(collect)
    # what is alive now lives as long as the zygote: frozen, a child's first collection of the
    # garbage (pytest_plugin: _freeze_heap) walks only what the child made
    gc.collect()
    gc.freeze()
    _say("READY")
    _serve()


def _serve():
    """Forks a child for each request and reports each child's end, several children at a
    time (a target's lanes share the zygote), until EOF on stdin. Each pytest child gets a
    socket pair to ask for cases on; a case's end is reported there, and a case outliving its
    limit, or the pytest child that asked for it, is killed with its process group."""
    tests = {}  # pid of a pytest child -> the zygote's end of its socket pair (None at its EOF)
    cases_of = {}  # pid of a case -> [the socket of the pytest child that asked, deadline]
    pending = b""
    while True:
        socks = [s for s in tests.values() if s is not None]
        ready, _, _ = select.select([0] + socks, [], [], 0.02 if tests or cases_of else None)
        for sock in ready:
            if sock == 0:
                data = os.read(0, 65536)
                if not data:
                    for pid in cases_of:
                        _kill(pid)
                    return
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        pid, sock = _fork_test(json.loads(line), socks)
                        tests[pid] = sock
                        _say("PID %d" % pid)
                continue
            request = cases.take_request(sock)
            if request is None:  # the pytest child closed its end: its cases go too
                for test in [p for p, s in tests.items() if s is sock]:
                    tests[test] = None
                sock.close()
                for pid, (owner, _) in cases_of.items():
                    if owner is sock:
                        _kill(pid)
                continue
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _case(request, socks)  # does not return: SystemExit ends the case's interpreter
            for fd in request["fds"]:
                os.close(fd)
            cases_of[pid] = [sock, time.monotonic() + request["timeout"]]
        now = time.monotonic()
        for pid, entry in cases_of.items():
            if entry[1] is not None and now > entry[1]:
                _kill(pid)
                entry[1] = None  # reported as a timeout once reaped
        _reap(tests, cases_of)


def _fork_test(request, socks):
    """(pid, the zygote's end of its socket pair) of a pytest child forked for `request`."""
    mine, theirs = socket.socketpair()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(request, theirs, socks + [mine])  # does not return: SystemExit ends the child
    theirs.close()
    return pid, mine


def _kill(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # it ended already (it is reaped later), or had not yet called setsid
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _reap(tests, cases_of):
    """Reports the end of each child that ended: a pytest child's to the runner, a case's to
    the pytest child that asked for it."""
    while tests or cases_of:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if pid in tests:
            sock = tests.pop(pid)
            if sock is not None:
                sock.close()
            _say("EXIT %d %d" % (pid, code))
        elif pid in cases_of:
            owner, deadline = cases_of.pop(pid)
            try:
                owner.sendall(b"EXIT %s\n" % (b"timeout" if deadline is None else str(code).encode()))
            except OSError:  # the pytest child that asked is gone
                pass


if __name__ == "__main__":
    main(sys.argv[1:])
