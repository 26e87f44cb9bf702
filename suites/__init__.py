"""The conformance checks, installed as the package dlconform.suites (see suites/README.md)."""
