from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from practice.views import mock, pages, parts

urlpatterns = [
    path("", pages.catalog, name="catalog"),
    path("signup/", pages.signup, name="signup"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("history/", pages.history, name="history"),
    path("ex/<slug:slug>/", pages.exercise_page, name="exercise"),
    path("ex/<slug:slug>/evidence/<str:name>/", pages.evidence_download, name="evidence"),
    path("ex/<slug:slug>/<str:part_id>/submit/", parts.submit_part, name="submit_part"),
    path("ex/<slug:slug>/<str:part_id>/reveal/", parts.reveal_part, name="reveal_part"),
    path("ex/<slug:slug>/<str:part_id>/preview/", parts.preview_formula, name="preview_formula"),
    path("submissions/<int:pk>/status/", parts.submission_status, name="submission_status"),
    path("practice/random/", mock.random_question, name="random_question"),
    path("mock/start/", mock.mock_start, name="mock_start"),
    path("mock/<int:pk>/", mock.mock_detail, name="mock_detail"),
    path("mock/<int:pk>/finish/", mock.mock_finish, name="mock_finish"),
    path("admin/", admin.site.urls),
]
