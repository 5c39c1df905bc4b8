"""The provider's pages: OAuth 2 / OpenID Connect, its sign-in, and a
control endpoint the tests use to move a user between groups (as an
administrator would at a real provider)."""

from __future__ import annotations

import hmac
import json
import os

from django.contrib.auth import views as auth_views
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST


@csrf_exempt
@require_POST
def set_groups(request: HttpRequest) -> HttpResponse:
    if not hmac.compare_digest(request.headers.get("X-Control-Token", ""), os.environ["IDP_CONTROL_TOKEN"]):
        return HttpResponseForbidden()
    body = json.loads(request.body)
    user = User.objects.get(username=body["username"])
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    return JsonResponse({"username": user.username, "groups": body["groups"]})


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("control/groups/", set_groups),
]
