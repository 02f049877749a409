from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from practice.models import (
    Assignment,
    Cohort,
    Comment,
    Exercise,
    Membership,
    MockInterview,
    PartState,
    RegradeEntry,
    RegradeJob,
    Review,
    RubricItem,
    Submission,
    User,
)


@admin.register(User)
class RooflineUserAdmin(UserAdmin):
    """Django's user admin, plus the instructor flag (who may make cohorts and review)."""

    list_display = ("username", "email", "is_instructor", "is_staff", "is_active", "last_login")
    list_filter = ("is_instructor", "is_staff", "is_superuser", "is_active")
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Roofline", {"fields": ("is_instructor",)}))


@admin.register(Exercise)
class ExerciseAdmin(admin.ModelAdmin):
    list_display = ("seed", "slug", "title", "topic", "difficulty", "active")
    list_filter = ("topic", "active")


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("pk", "user", "exercise", "part_id", "mode", "status", "score", "deliveries",
                    "queued_at")
    list_filter = ("status", "mode", "part_type")
    readonly_fields = ("result",)

    # A submission is what the student sent and what the grader said: staff may read or delete
    # one, never rewrite it (a score changes through a review or a re-grade, which keep the old).
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


admin.site.register(Assignment)
admin.site.register(PartState)


@admin.register(MockInterview)
class MockInterviewAdmin(admin.ModelAdmin):
    list_display = ("pk", "user", "started_at", "duration_s", "finished_at", "ended_by")
    list_filter = ("ended_by",)


# --- instructors (issue 12) ------------------------------------------------------------------
# Cohorts, memberships and rubric items are configuration: staff may fix them. Reviews, comments
# and re-grades are history (scores a student was shown, old scores a re-grade replaced): staff
# may look, never edit, so the site's record of what happened stays what happened.


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ("user",)


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "join_code", "created_at")
    search_fields = ("name", "join_code", "owner__username")
    raw_id_fields = ("owner",)
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("cohort", "user", "joined_at")
    list_filter = ("cohort",)
    search_fields = ("user__username", "cohort__name")
    raw_id_fields = ("user",)


@admin.register(RubricItem)
class RubricItemAdmin(admin.ModelAdmin):
    """Editing points here does not recompute reviews (the rubric page does): change labels and
    explanations here, points on the rubric page."""

    list_display = ("label", "cohort", "exercise", "part_id", "points", "order")
    list_filter = ("cohort", "exercise")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("points",) if obj is not None else ()


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ("submission", "cohort", "score", "override_score", "reviewer", "updated_at")
    list_filter = ("cohort",)


@admin.register(Comment)
class CommentAdmin(ReadOnlyAdmin):
    list_display = ("submission", "author", "line", "created_at")


class RegradeEntryInline(admin.TabularInline):
    model = RegradeEntry
    extra = 0
    fields = ("submission", "old_score", "old_verdict", "new_score", "new_verdict", "error",
              "finished_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RegradeJob)
class RegradeJobAdmin(ReadOnlyAdmin):
    list_display = ("pk", "exercise", "status", "done", "total", "changed", "failed",
                    "created_by", "created_at")
    list_filter = ("status",)
    inlines = [RegradeEntryInline]


@admin.register(RegradeEntry)
class RegradeEntryAdmin(ReadOnlyAdmin):
    list_display = ("job", "submission", "old_score", "new_score", "error", "finished_at")
