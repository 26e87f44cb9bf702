"""Suite-wide pytest setup. The dlconform plugin itself is loaded by the runner with -p."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # strategies.py and _layout_support.py import as top-level modules
    sys.path.insert(0, _HERE)
