from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order of a Django order service (its table made by the tests)."""

    order_id = models.CharField(primary_key=True, max_length=64)
    note = models.CharField(max_length=64)

    class Meta:
        app_label = "djangoapp"
        db_table = "py_django_orders"
