"""Suite-wide pytest setup. The dlconform plugin itself is loaded by the runner with -p."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the test files import the `support` package as a top-level package
    sys.path.insert(0, _HERE)
