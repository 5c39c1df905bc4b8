"""Every URL of the site, in one place; the views live in ``views/``.

Names and namespaces (``review:``, ``ops:``, ``api:``) are what templates,
redirects and tests reverse, so a path can change here without touching them.
"""

from django.contrib import admin
from django.urls import include, path

from .api_guard import guarded
from .views import (
    alerts,
    api,
    api_items,
    auth,
    dashboard,
    deliveries,
    export,
    instructions,
    items,
    metrics,
    oidc,
    quality,
    queues,
    review,
    whatif,
)

review_urls = (
    [
        path("", review.queue, name="queue"),
        # The empty queue's poll target: the same view as the page, at its own URL.
        path("waiting/", review.queue, name="waiting"),
        path("next/", review.next_item, name="next"),
        path("undo/", review.undo, name="undo"),
        path("<int:item_id>/decide/", review.decide, name="decide"),
        path("<int:item_id>/send-back/", review.send_back, name="send_back"),
        path("<int:item_id>/skip/", review.skip, name="skip"),
        path("<int:item_id>/renew/", review.renew, name="renew"),
        path("history/", items.history, name="history"),
    ],
    "review",
)

ops_urls = (
    [
        path("", dashboard.dashboard, name="dashboard"),
        path("rules/<int:rule_id>/preview/", dashboard.rule_preview, name="rule_preview"),
        path("rules/<int:rule_id>/<str:action>/", dashboard.rule_decide, name="rule_decide"),
        path("policy/", dashboard.policy_settings, name="policy"),
        path("policy/instructions/preview/", instructions.instructions_preview, name="instructions_preview"),
        path("whatif/", whatif.whatif, name="whatif"),
        path("whatif/run/", whatif.whatif_run, name="whatif_run"),
        path("whatif/compare/", whatif.whatif_compare, name="whatif_compare"),
        # "If we add a queue": under whatif/, where no queue slug can be taken for it.
        path("whatif/add-queue/", whatif.queues_whatif, name="queues_whatif"),
        path("whatif/add-queue/run/", whatif.queues_whatif_run, name="queues_whatif_run"),
        path("whatif/<int:run_id>/", whatif.whatif_result, name="whatif_result"),
        path("export/", export.export, name="export"),
        path("export/download/", export.export_download, name="export_download"),
        path("items/", items.item_list, name="items"),
        path("items/bulk/", items.bulk_action, name="items_bulk"),
        path("items/<int:item_id>/", items.item_detail, name="item"),
        path("deliveries/", deliveries.deliveries, name="deliveries"),
        path("deliveries/<int:delivery_id>/redeliver/", deliveries.redeliver, name="delivery_redeliver"),
        path("alerts/", alerts.alert_list, name="alerts"),
        path("alerts/<int:alert_id>/acknowledge/", alerts.acknowledge, name="alert_acknowledge"),
        path("alerts/channels/", alerts.channels, name="alert_channels"),
        path("alerts/channels/<int:channel_id>/delete/", alerts.channel_delete, name="alert_channel_delete"),
        path("alerts/channels/<int:channel_id>/test/", alerts.channel_test, name="alert_channel_test"),
        path("quality/", quality.quality_page, name="quality"),
        path("quality/items/<int:item_id>/settle/", quality.settle, name="quality_settle"),
        path("quality/items/<int:item_id>/gold/", quality.mark_gold, name="gold_mark"),
        path("quality/gold/<int:gold_id>/retire/", quality.retire_gold, name="gold_retire"),
        path("quality/reviewers/<int:reviewer_id>/reinstate/", quality.reinstate, name="quality_reinstate"),
        path("queues/", queues.queues, name="queues"),
        path("queues/<slug:slug>/", queues.queue_detail, name="queue"),
        path("queues/<slug:slug>/<str:action>/", queues.queue_archive, name="queue_archive"),
        path("routing/", queues.routing_rules, name="routing"),
        path("routing/<int:rule_id>/", queues.routing_rule_edit, name="routing_rule"),
        path("routing/<int:rule_id>/delete/", queues.routing_rule_delete, name="routing_rule_delete"),
        path("routing/<int:rule_id>/move/<str:direction>/", queues.routing_rule_move, name="routing_rule_move"),
    ],
    "ops",
)

# django-ninja builds the API's routes; each is wrapped in the body-size guard
# and opened to token auth (reviewqueue/api_guard.py says why).
api.api.add_router("", api_items.router)
api_urls = (guarded(api.api.urls[0]), "api")

urlpatterns = [
    path("", auth.home, name="home"),
    path("login/", auth.login_view, name="login"),
    # With OIDC_ONLY, the superusers' break-glass sign-in (throttled like the others).
    path("login/password/", auth.break_glass_login_view, name="login_password"),
    path("logout/", oidc.logout_view, name="logout"),
    # The identity provider's sign-in (404 while no OIDC_ISSUER is set).
    path("oidc/authenticate/", oidc.authenticate_view, name="oidc_authenticate"),
    path("oidc/callback/", oidc.callback_view, name="oidc_callback"),
    path("health/", auth.health, name="health"),
    # Outside the review namespace: operators may read an item too, which
    # every other review URL refuses them.
    path("review/items/<int:item_id>/", review.item_page, name="review_item"),
    path("review/", include(review_urls)),
    path("ops/", include(ops_urls)),
    # Before the API's own routes: a page for people, signed in, not a token endpoint.
    path("api/docs", export.api_docs, name="api_docs"),
    path("api/", include(api_urls)),
    # Before admin.site.urls, which would otherwise answer it: the admin's
    # sign-in is rate-limited like the site's.
    path("admin/login/", auth.admin_login, name="admin_login"),
    path("admin/", admin.site.urls),
    path("metrics", metrics.metrics, name="metrics"),
]

handler404 = "reviewqueue.views.errors.not_found"
handler500 = "reviewqueue.views.errors.server_error"
