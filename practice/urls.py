from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from practice.views import auth, cohorts, mock, ops, pages, parts, progress, recall, review, stats

urlpatterns = [
    path("", pages.catalog, name="catalog"),
    path("signup/", pages.signup, name="signup"),
    # Failed log-ins are throttled per username and address (practice/ratelimit.py).
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("history/", pages.history, name="history"),
    path("ex/<slug:slug>/", pages.exercise_page, name="exercise"),
    path("ex/<slug:slug>/evidence/<str:name>/", pages.evidence_download, name="evidence"),
    path("ex/<slug:slug>/hints/<str:hint_id>/", parts.reveal_hint_view, name="reveal_hint"),
    path("ex/<slug:slug>/<str:part_id>/submit/", parts.submit_part, name="submit_part"),
    path("ex/<slug:slug>/<str:part_id>/reveal/", parts.reveal_part, name="reveal_part"),
    path("ex/<slug:slug>/<str:part_id>/preview/", parts.preview_formula, name="preview_formula"),
    path("submissions/<int:pk>/status/", parts.submission_status, name="submission_status"),
    path("submissions/<int:pk>/contest/<int:point>/", parts.contest_point, name="contest_point"),
    # Recall: the deck of numbers to know, and what is due today (cards answered in place).
    path("deck/", recall.deck_page, name="deck"),
    path("deck/answer/", recall.deck_answer, name="deck_answer"),
    path("today/", recall.today, name="today"),
    path("today/<int:pk>/answer/", recall.today_answer, name="today_answer"),
    # A part due for recall is reviewed in a variant drawn for the review.
    path("today/<int:pk>/review/", recall.review_page, name="review_part"),
    path("today/<int:pk>/review/submit/", recall.review_submit, name="review_submit"),
    path("today/<int:pk>/review/evidence/<str:name>/", recall.review_evidence,
         name="review_evidence"),
    path("progress/", progress.my_progress, name="my_progress"),
    path("practice/random/", mock.random_question, name="random_question"),
    path("mock/start/", mock.mock_start, name="mock_start"),
    path("mock/<int:pk>/", mock.mock_detail, name="mock_detail"),
    path("mock/<int:pk>/finish/", mock.mock_finish, name="mock_finish"),
    # Students join a cohort; instructors review it (practice/access.py decides who sees what).
    path("join/", cohorts.join, name="join"),
    path("join/<str:code>/", cohorts.join, name="join_code"),
    path("teach/", cohorts.dashboard, name="teach"),
    path("teach/cohorts/new/", cohorts.create, name="cohort_create"),
    path("teach/cohorts/<int:pk>/", cohorts.detail, name="cohort"),
    path("teach/cohorts/<int:pk>/export.csv", cohorts.export_csv, name="cohort_export"),
    path("teach/cohorts/<int:pk>/stats/", stats.cohort_stats, name="cohort_stats"),
    path("teach/cohorts/<int:pk>/stats/<slug:slug>/", stats.exercise_stats,
         name="exercise_stats"),
    path("teach/cohorts/<int:pk>/rubric/<slug:slug>/<str:part_id>/", review.rubric,
         name="rubric"),
    path("teach/review/", review.queue, name="review_queue"),
    path("teach/submissions/<int:pk>/", review.attempt, name="attempt"),
    path("teach/submissions/<int:pk>/comment/", review.comment, name="attempt_comment"),
    path("teach/submissions/<int:pk>/rubric/", review.apply_rubric, name="attempt_rubric"),
    path("teach/submissions/<int:pk>/override/", review.override, name="attempt_override"),
    path("teach/regrade/<slug:slug>/", stats.regrade_start, name="regrade_start"),
    path("teach/regrade/jobs/<int:pk>/", stats.regrade_progress, name="regrade_progress"),
    # Operations: health (anyone), metrics (staff or the bearer token), the queue (staff).
    path("healthz/", ops.healthz, name="healthz"),
    path("metrics", ops.prometheus, name="metrics"),
    path("ops/queue/", ops.queue, name="ops_queue"),
    path("admin/", admin.site.urls),
]
