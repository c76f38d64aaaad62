"""``INSTALLED_APPS = [..., "trustmsg.django"]``: its migration creates the
barrier, inbox and local message tables."""

from __future__ import annotations

from django.apps import AppConfig


class TrustmsgConfig(AppConfig):
    name = "trustmsg.django"
    label = "trustmsg"
    verbose_name = "trustmsg"
