"""Out-of-band pieces an htmx answer carries besides its own fragment."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string


def with_due_count(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """Append the header's due count (partials/due_count.html) for htmx to swap out of band:
    an answer that reschedules an item changes what is due, and the header is outside the
    fragment the answer redraws."""
    response.content += render_to_string("practice/partials/due_count.html", {"oob": True},
                                         request=request).encode()
    return response
