"""The admin, at /admin/; the async views of docs/django.md."""

from django.contrib import admin
from django.urls import path
from shop.views import checkout, remind

urlpatterns = [
    path("admin/", admin.site.urls),
    path("checkout/", checkout),
    path("remind/", remind),
]
