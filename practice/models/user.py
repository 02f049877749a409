from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """Our own user model from the first migration, so adding fields later needs no surgery."""

    is_instructor = models.BooleanField(default=False)

    class Meta:
        db_table = "practice_user"
