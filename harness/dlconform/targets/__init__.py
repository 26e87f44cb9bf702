"""Target adapters: the libraries under test."""
from .base import ROLES, Target, TargetError

__all__ = ["ROLES", "Target", "TargetError"]
