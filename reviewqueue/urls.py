from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from .views import auth, ops

urlpatterns = [
    path("", auth.home, name="home"),
    path("login/", auth.login_view, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("health/", auth.health, name="health"),
    path("review/", include("reviewqueue.views.review")),
    path("ops/", include("reviewqueue.views.ops")),
    # Before the API's own routes: a page for people, signed in, not a token endpoint.
    path("api/docs", ops.api_docs, name="api_docs"),
    path("api/", include("reviewqueue.views.api")),
    # Before admin.site.urls, which would otherwise answer it: the admin's
    # sign-in is rate-limited like the site's.
    path("admin/login/", auth.admin_login, name="admin_login"),
    path("admin/", admin.site.urls),
    path("", include("reviewqueue.views.metrics")),
]
