"""Verdict names and the exceptions checks raise: kept in dlconform.kit.check (re-exported here)."""
from .kit.check import (FAILING, HARNESS_ERROR, LEVELS, VERDICTS, CheckFailure, Unsupported, Warn, breach,  # noqa: F401
                        check_verdict, rank, worst)
