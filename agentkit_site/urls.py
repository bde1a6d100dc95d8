from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from apps.dashboard.views import dashboard_page
from apps.tasks.doors.health import healthz
from apps.tasks.doors.metrics_view import metrics_view
from apps.tools.views import mcp_page

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/mcp/", admin.site.admin_view(mcp_page), name="admin_mcp"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("django-rq/", include("django_rq.urls")),
    path("dashboard/", dashboard_page, name="dashboard"),
    path("", include("apps.specs.urls")),
    path("", include("apps.tasks.urls")),
]
