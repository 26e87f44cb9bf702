"""`python3 -m dlconform.bench --child SPEC`: one target measured in this process."""
import sys

from .child import main

sys.exit(main(sys.argv[1:]))
