"""Every state change in Roofline, one module per area. Views parse, call one function here,
and render. Reads that change nothing live beside the package (practice/variants.py,
scores.py, interview.py, routing.py, stats.py, reports.py); grading a submission, in the
request or in a worker, is practice/grading.py.

    exercises.py        folders → Exercise rows; a student's variant, drawn at first visit
    submissions.py      answering: submit (graded now, or queued), reveal a solution
    progress.py         a student's PartState: attempts, best score (less revealed hints), solved
    hints.py            revealing a statement's hint in interview mode
    publish.py          sending work to a queue, by task name (practice/routing.py routes)
    mock_interviews.py  start, finish and expire a timed mock interview
    people.py           sign-up, demo users
    cohorts.py          create, join and leave a cohort
    reviews.py          an instructor's comments, rubric and score overrides
    regrade.py          starting a re-grade of an exercise (practice/grading.py runs it)
    recall.py           a student's items due again (FSRS via practice/recall.py)

Nothing here imports practice.tasks: work reaches the workers by task name.
"""
from __future__ import annotations


class NotAllowed(Exception):
    """The action is not permitted now (e.g. a part that does not exist)."""


def refuse_nul(*texts: str) -> None:
    """PostgreSQL cannot store a NUL in a text column; refuse it here rather than fail the save."""
    if any("\x00" in t for t in texts):
        raise NotAllowed("the text contains a NUL character")
