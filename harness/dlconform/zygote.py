"""The runner's warm parent (issue 22): a process that has imported pytest, hypothesis, the
plugin and the library once, and forks a pytest child for each attempt of a target's run.

A child that dies (a crash, a kill at a time limit) then costs a fork and a collection, not an
interpreter and an import of the library: torch 1.13 dies on 20 checks, and each death used to
cost a fresh interpreter that imported torch again.

The fork happens before any check ran: the library has been imported, not used, so it has
started no threads and holds no device. Each child starts its own session (its process group is
its pid, which the runner kills on a limit), points fds 0, 1 and 2 where the runner says, and
runs pytest.main in the same way `python -m pytest` would; it exits through SystemExit, so the
interpreter's exit runs as in any Python process (checks and crashes at exit stay visible).

Protocol, one line each way (the runner's side is runner._Zygote):
- zygote -> runner, once: `READY` after the imports;
- runner -> zygote: a JSON object {"args": pytest arguments, "out": path, "err": path};
- zygote -> runner: `PID <pid>` once forked, then `EXIT <pid> <returncode>` (negative: killed by
  that signal, as subprocess says).
EOF on stdin ends the zygote.
"""
import importlib
import json
import os
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


def main(argv):
    # what every child imports anyway, and the library (argv[0], optional): an import that
    # fails here is left to the child, which reports it as the runner always did
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    from . import pytest_plugin  # noqa: F401

    for name in argv[:1]:
        try:
            importlib.import_module(name)
        except Exception:  # the child's own import says what is wrong
            pass
    _say("READY")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)  # does not return: SystemExit ends the child's interpreter
        _say("PID %d" % pid)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _say("EXIT %d %d" % (pid, code))


if __name__ == "__main__":
    main(sys.argv[1:])
