"""Report renderers: JSON (results.json), Markdown (results.md), JUnit XML (results.junit.xml).

The JSON schema is documented in reports/README.md.
"""
import os
import secrets

from . import json_report, junit, markdown


def _create_beside(path):
    """(fd, name) of a new file next to path, created as open() creates one: mode 0666 less the
    umask (and the folder's default ACL), which mkstemp's 0600 is not; O_EXCL: never another's."""
    d, base = os.path.split(os.path.abspath(path))
    while True:
        tmp = os.path.join(d, ".%s.%s.tmp" % (base, secrets.token_hex(6)))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue


def atomic_write(path, text):
    """Writes text to path through a temporary file in the same folder and os.replace."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_all(out_dir, doc):
    """results.json, results.md and results.junit.xml under out_dir; returns their paths."""
    paths = {
        "json": os.path.join(out_dir, "results.json"),
        "markdown": os.path.join(out_dir, "results.md"),
        "junit": os.path.join(out_dir, "results.junit.xml"),
    }
    atomic_write(paths["json"], json_report.dumps(doc))
    atomic_write(paths["markdown"], markdown.render(doc))
    atomic_write(paths["junit"], junit.render(doc))
    return paths
