"""The queue instructions editor's preview: Markdown rendered exactly as
reviewers will see it, through the same Markdown and sanitiser pipeline
(``markdown_tags.markdown``). Reads nothing and writes nothing."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from ..access import operator_required
from .http import HtmxHttpRequest


@require_POST
@operator_required
def instructions_preview(request: HtmxHttpRequest) -> HttpResponse:
    """The posted ``instructions`` as reviewers would see them: the preview
    fragment for htmx, a page of its own without JavaScript."""
    context = {"instructions": request.POST.get("instructions", "")}
    if request.htmx:
        return render(request, "ops/instructions_preview.html#preview", context)
    return render(request, "ops/instructions_preview.html", context)
