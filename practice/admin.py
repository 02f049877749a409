from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from practice.models import Assignment, Exercise, MockInterview, PartState, Submission, User

admin.site.register(User, UserAdmin)


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


admin.site.register(Assignment)
admin.site.register(PartState)


@admin.register(MockInterview)
class MockInterviewAdmin(admin.ModelAdmin):
    list_display = ("pk", "user", "started_at", "duration_s", "finished_at", "ended_by")
    list_filter = ("ended_by",)
