from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import Col
from django.db.models.sql import Query

from .mock import MockInterview


class Exercise(models.Model):
    """One row per exercise, keyed by its stable id (exercise.toml `uuid`); rewritten by
    `practice.actions.exercises.sync_exercises`.

    The folder is the source of truth; the row exists so that submissions, progress and statistics
    can point at something, and so a removed folder keeps its history (`active=False`). A renamed
    folder keeps its row: the uuid finds it and the slug follows the folder.
    """

    # Null only for a row made before exercises had ids; the first sync adopts it by slug.
    uuid = models.UUIDField(unique=True, null=True, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    seed = models.CharField(max_length=3)
    title = models.CharField(max_length=200)
    topic = models.CharField(max_length=100)
    difficulty = models.CharField(max_length=10)
    minutes = models.PositiveIntegerField(default=20)
    summary = models.TextField(blank=True)
    parts = models.JSONField(default=list)  # [{"id", "type", "points"}] for listing and stats
    active = models.BooleanField(default=True)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["topic", "seed"]

    def __str__(self) -> str:
        return f"{self.seed} {self.title}"


@dataclass(frozen=True)
class _PageStatement:
    """AssignmentManager.kept_for_page's SQL for one database, the fields in the order it
    selects them, and each one's column (whose converters turn a value as the database gives it
    into the field's: a JSON field's parse, SQLite's datetimes, UUIDs and booleans). Plain
    data, shared by every thread; the converters are asked of each call's own connection."""

    sql: str
    assignment_fields: list[str]
    exercise_fields: list[str]
    columns: list[Col]

    def model_values(self, connection: BaseDatabaseWrapper, alias: str,
                     row: tuple[Any, ...]) -> list[Any]:
        """`row` with every column converted as the ORM converts what it reads."""
        compiler = connection.ops.compiler("SQLCompiler")(Query(Assignment), connection, alias)
        converters = compiler.get_converters(self.columns)
        return list(next(iter(compiler.apply_converters([list(row)], converters))))


def _page_statement(connection: BaseDatabaseWrapper) -> _PageStatement:
    q = connection.ops.quote_name
    mine, ex, mock = Assignment._meta, Exercise._meta, MockInterview._meta
    mine_fields, ex_fields = list(mine.concrete_fields), list(ex.concrete_fields)

    def col(meta: Any, name: str) -> str:
        return q(meta.get_field(name).column)

    selected = ([f"a.{q(f.column)}" for f in mine_fields]
                + [f"e.{q(f.column)}" for f in ex_fields])
    sql = (f"SELECT {', '.join(selected)}, EXISTS (SELECT 1 FROM {q(mock.db_table)} m "
           f"WHERE m.{col(mock, 'user')} = a.{col(mine, 'user')} "
           f"AND m.{col(mock, 'finished_at')} IS NULL) AS mock_unfinished "
           f"FROM {q(mine.db_table)} a JOIN {q(ex.db_table)} e "
           f"ON e.{col(ex, 'id')} = a.{col(mine, 'exercise')} "
           f"WHERE a.{col(mine, 'user')} = %s AND e.{col(ex, 'slug')} = %s "
           f"AND e.{col(ex, 'active')}")
    return _PageStatement(sql, [f.attname for f in mine_fields], [f.attname for f in ex_fields],
                          [f.get_col("a") for f in mine_fields]
                          + [f.get_col("e") for f in ex_fields])


class AssignmentManager(models.Manager["Assignment"]):
    _statements: dict[str, _PageStatement] = {}

    def kept_for_page(self, user_id: int, slug: str) -> Assignment | None:
        """The student's kept variant of the active exercise `slug`, with the exercise, in one
        statement; None before the first visit (or for no such active exercise). The row also
        says, as `mock_unfinished`, whether the student has a mock interview not yet recorded
        as ended: False spares the exercise page its look-up of a running mock
        (interview.running_mock); True means look (its deadline may have passed).

        Written as SQL, made once per process and database, because it is on every exercise
        page: the ORM's form (select_related, then a second query for the mock) took ~2 ms a
        page to compile, three times what the database takes to answer both."""
        connection = connections[self.db]
        statement = self._statements.get(connection.vendor)
        if statement is None:
            statement = self._statements[connection.vendor] = _page_statement(connection)
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, [user_id, slug])
            row = cursor.fetchone()
        if row is None:
            return None
        values = statement.model_values(connection, self.db, row)
        mine = len(statement.assignment_fields)
        exercise = Exercise.from_db(self.db, statement.exercise_fields,
                                    values[mine:mine + len(statement.exercise_fields)])
        assignment = self.model.from_db(self.db, statement.assignment_fields, values[:mine])
        assignment.exercise = exercise  # the select_related way: no query on access
        assignment.mock_unfinished = bool(values[-1])  # SQLite answers 0 or 1
        return assignment


class Assignment(models.Model):
    """The variant a student works on for an exercise (drawn once, kept)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    variant = models.CharField(max_length=20)  # "canonical" or a seed number
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AssignmentManager()
    mock_unfinished: bool  # set by AssignmentManager.kept_for_page only

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "exercise"], name="one_variant_per_exercise")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.exercise_id} variant {self.variant}"
