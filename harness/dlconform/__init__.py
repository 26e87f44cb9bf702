"""dlconform: a conformance test suite and fuzzer for DLPack producers and consumers."""
import os as _os

__version__ = "0.1.0"

#: harness/dlconform
PACKAGE_DIR = _os.path.dirname(_os.path.abspath(__file__))
#: harness/
HARNESS_DIR = _os.path.dirname(PACKAGE_DIR)
#: the repository root
REPO_DIR = _os.path.dirname(HARNESS_DIR)
#: the suites: dlconform/suites/ in an installed package (pyproject.toml maps the
#: repository's suites/ there), else the repository's suites/
SUITES_DIR = _os.path.join(PACKAGE_DIR, "suites")
if not _os.path.isdir(SUITES_DIR):
    SUITES_DIR = _os.path.join(REPO_DIR, "suites")
