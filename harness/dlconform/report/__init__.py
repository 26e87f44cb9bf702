"""Report renderers: JSON (results.json), Markdown (results.md), JUnit XML (results.junit.xml).

The JSON schema is documented in reports/README.md.
"""
import os
import tempfile

from . import json_report, junit, markdown


def atomic_write(path, text):
    """Writes text to path through a temporary file in the same folder and os.replace."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
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
