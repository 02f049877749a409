"""People: sign-up, and the demo accounts `make run` makes."""
from __future__ import annotations

from practice.models import User


def sign_up(username: str, password: str, email: str = "") -> User:
    return User.objects.create_user(username=username, password=password, email=email)


def create_demo_users() -> list[str]:
    """A demo student and instructor for `make run` (local only; printed passwords)."""
    made = []
    for name, instructor in (("student", False), ("instructor", True)):
        user, created = User.objects.get_or_create(username=name, defaults={
            "is_instructor": instructor, "is_staff": instructor})
        if created:
            user.set_password(f"{name}-demo")
            user.save()
            made.append(name)
    return made
