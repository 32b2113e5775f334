"""Run by ``manage.py test shop`` (tests/test_django.py): the app follows Django's test
database, whose creation (``migrate``) also creates mailfathom's tables."""

from django.core.mail import send_mail
from django.db import connection
from django.test import TransactionTestCase, override_settings

from mailfathom.contrib.django import enqueue, get_app


# Django's test runner swaps EMAIL_BACKEND for its in-memory one; put ours back.
@override_settings(EMAIL_BACKEND="mailfathom.contrib.django.EmailBackend")
class TestDatabase(TransactionTestCase):
    """Email and jobs written in a test land in the test database."""

    def test_mail_and_jobs_go_to_the_test_database(self) -> None:
        """The app was rebuilt on the test database, with the project's handlers."""
        send_mail("in a test", "Hello.", None, ["ann@example.com"])
        enqueue("shop.note", {"note": "in-a-test"})
        app = get_app()
        assert app.settings.database_url.endswith(str(connection.settings_dict["NAME"]))
        assert "test" in app.settings.database_url
        assert [e.subject for e in app.outbox.list()] == ["in a test"]
        assert sorted(j.kind for j in app.jobs.list()) == ["mailfathom.deliver", "shop.note"]
        assert app.registry.get("shop.note") is not None


class TestWithoutMailfathom(TransactionTestCase):
    """A test that never uses mailfathom: the test database is dropped after it all the same."""

    def test_an_order_is_saved(self) -> None:
        """Only the ORM."""
        from shop.models import Order

        Order.objects.create(note="plain")
        assert Order.objects.count() == 1
