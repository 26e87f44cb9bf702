"""Suite-wide pytest setup. The dlconform plugin itself is loaded by the runner with -p."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the test files import the `support` package as a top-level package
    sys.path.insert(0, _HERE)


def pytest_configure(config):
    # issue 12 item 4: what a check feeds the library; the grading plugin reads it
    config.addinivalue_line("markers", 'feeds(kind): "valid" (default), "invalid" or "argument": what the check '
                                       "feeds the library under test")
