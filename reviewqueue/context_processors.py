from django.http import HttpRequest

from .access import is_operator, is_reviewer


def roles(request: HttpRequest) -> dict[str, bool]:
    user = getattr(request, "user", None)
    if user is None:
        return {"is_reviewer": False, "is_operator": False}
    return {"is_reviewer": is_reviewer(user), "is_operator": is_operator(user)}
