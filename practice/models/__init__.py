"""Roofline's tables: users, exercises (synced from folders), per-part progress, submissions."""
from __future__ import annotations

from .exercise import Assignment, Exercise
from .progress import PartState
from .submission import Submission
from .user import User

__all__ = ["Assignment", "Exercise", "PartState", "Submission", "User"]
