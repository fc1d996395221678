"""The site's own routes; /a2a never reaches them (djsite.a2a.MountDoor sends it to the door)."""
from django.http import JsonResponse
from django.urls import path


def index(request):
    return JsonResponse({"site": "django example", "a2a": "/a2a"})


def health(request):
    return JsonResponse({"ok": True})


urlpatterns = [path("", index), path("health", health)]
