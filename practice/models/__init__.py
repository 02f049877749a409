"""Roofline's tables: users, exercises (synced from folders), per-part progress, submissions,
mock interviews, hints revealed, items due for recall, and the instructors' cohorts, reviews and
re-grades."""
from __future__ import annotations

from .cohort import Cohort, Comment, Membership, RegradeEntry, RegradeJob, Review, RubricItem
from .exercise import Assignment, Exercise
from .hint import HintReveal
from .mock import MockInterview
from .progress import PartState
from .recall import RecallItem, RecallLog
from .submission import KeyPointContest, Submission
from .user import User

__all__ = ["Assignment", "Cohort", "Comment", "Exercise", "HintReveal", "Membership",
           "MockInterview", "KeyPointContest", "PartState", "RecallItem", "RecallLog", "RegradeEntry", "RegradeJob", "Review",
           "RubricItem", "Submission", "User"]
