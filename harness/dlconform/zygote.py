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

Command line: `python -m dlconform.zygote [--collect JSON-LIST] [MODULE]`.

Protocol, one line each way (the runner's side is runner._Zygote):
- zygote -> runner, once: `READY` after the imports;
- runner -> zygote: a JSON object {"args": pytest arguments, "out": path, "err": path};
- zygote -> runner: `PID <pid>` once forked (before it reads the next request), then, when
  the child has ended, `EXIT <pid> <returncode>` (negative: killed by that signal, as
  subprocess says). Several children may run at once: the EXIT lines come in the order the
  children end.
EOF on stdin ends the zygote.
"""
import gc
import importlib
import json
import os
import select
import sys


def _child(request):
    """In the forked child: the runner's session, fds and pytest, as `python -m pytest`."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    import pytest

    sys.argv = ["pytest", *request["args"]]
    raise SystemExit(pytest.main(list(request["args"])))


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


def main(argv):
    # what every child imports anyway, and the library (MODULE, optional): an import that
    # fails here is left to the child, which reports it as the runner always did
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    from . import pytest_plugin  # noqa: F401

    collect = None
    if argv[:1] == ["--collect"]:
        collect, argv = json.loads(argv[1]), argv[2:]
    for name in argv[:1]:
        try:
            importlib.import_module(name)
        except Exception:  # the child's own import says what is wrong
            pass
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
    time (a target's lanes share the zygote), until EOF on stdin."""
    children = set()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.02 if children else None)
        if ready:
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                request = json.loads(line)
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request)  # does not return: SystemExit ends the child's interpreter
                children.add(pid)
                _say("PID %d" % pid)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            _say("EXIT %d %d" % (pid, code))


if __name__ == "__main__":
    main(sys.argv[1:])
