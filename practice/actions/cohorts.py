"""Cohorts: an instructor creates one (with a join code), students join and leave it.
Permission checks live in practice/access.py; each action asks there first."""
from __future__ import annotations

from practice import access
from practice.actions import NotAllowed, refuse_nul
from practice.models import Cohort, Membership, User
from practice.models.cohort import new_join_code, normalize_join_code

MAX_COHORT_NAME = 100


def create_cohort(owner: User, name: str) -> Cohort:
    if not access.is_instructor(owner):
        raise NotAllowed("only instructors create cohorts")
    refuse_nul(name)
    name = " ".join(name.split())
    if not name or len(name) > MAX_COHORT_NAME:
        raise NotAllowed(f"a cohort needs a name of 1 to {MAX_COHORT_NAME} characters")
    for _ in range(5):  # a clash of 31^8 codes is unlikely; retry rather than fail
        code = new_join_code()
        if not Cohort.objects.filter(join_code=code).exists():
            return Cohort.objects.create(owner=owner, name=name, join_code=code)
    raise NotAllowed("could not make a unique join code; try again")


def join_cohort(user: User, code: str) -> Cohort:
    """Join by code (case and spaces do not matter). Joining twice is harmless."""
    normalized = normalize_join_code(code)
    cohort = Cohort.objects.filter(join_code=normalized).first() if normalized else None
    if cohort is None:
        raise NotAllowed("no cohort has that join code")
    if cohort.owner_id == user.pk:
        raise NotAllowed("you own this cohort")
    Membership.objects.get_or_create(cohort=cohort, user=user)
    return cohort


def leave_cohort(user: User, cohort: Cohort) -> None:
    Membership.objects.filter(cohort=cohort, user=user).delete()
