"""Roofline's tables: users, exercises (synced from folders), per-part progress, submissions,
mock interviews."""
from __future__ import annotations

from .exercise import Assignment, Exercise
from .mock import MockInterview
from .progress import PartState
from .submission import Submission
from .user import User

__all__ = ["Assignment", "Exercise", "MockInterview", "PartState", "Submission", "User"]
