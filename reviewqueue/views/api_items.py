"""``GET /api/items``: a producer's own items, filtered like the operators'
item list and paged by keyset, each in the shape of ``GET /api/items/{id}``.
A router of the API in ``views/api.py``, added to it in ``urls.py``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from ..item_filters import ItemFilterForm
from ..models import ApiToken, Queue
from ..selectors.items import producer_items
from .api import Error, _item_body, _token, producer_of

router = Router()

API_PAGE_SIZE = 50


@router.get(
    "/items",
    response={200: dict[str, Any], 400: Error, 401: Error, 403: Error},
    summary="Your items, filtered and paged (scope: outputs or tasks)",
)
def item_list(
    request: HttpRequest,
    queue: str = Query("", description="a queue's slug"),
    status: str = Query("", description="pending, claimed, approved, rejected, shed, filtered or sent_back"),
    decision: str = Query("", description="the verdict's: approve, reject, edit or send_back"),
    label: str = Query("", description="the rejection's reason label, such as logic_error"),
    run: str = Query("", description="your run id"),
    # Read as text and checked by the item list's form with the others, so
    # a bad number or date is named together with every other bad filter.
    version: str = Query("", description="a whole number, 1 or more"),
    since: str = Query("", description="admitted on or after this day, YYYY-MM-DD"),
    until: str = Query("", description="admitted on or before this day, YYYY-MM-DD"),
    q: str = Query("", description="words to find in the task and the output"),
    after: str = Query("", description="the next cursor of the previous page"),
) -> Status[dict[str, Any]]:
    """This token's producer's items, newest first, 50 to a page; ``next``
    is the cursor of the following page (pass it as ``after``), null on the
    last. Each item reads as ``GET /api/items/{item_id}`` reads it: a
    verdict shows only once final. A bad filter is a 400 naming it."""
    token = _token(request, ApiToken.Scope.OUTPUTS, ApiToken.Scope.TASKS)
    form = ItemFilterForm(request.GET, queues=Queue.objects.all())
    del form.fields["producer"]  # always the token's own
    if not form.is_valid():
        return Status(400, {"error": "invalid", "fields": form.messages()})
    page = producer_items(producer_of(token), form.item_filter(), after=form.cleaned_data["after"], size=API_PAGE_SIZE)
    return Status(200, {"items": [_item_body(item) for item in page.items], "next": page.next_cursor})
