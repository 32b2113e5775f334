"""mailfathom in the Django admin: jobs (with attempts) and emails (with stages and recipients).

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Read-only views over the project's app (``mf.jobs``, ``mf.outbox``), in the admin's
look and behind its login; no Django table is involved. The operator moves are
buttons on a job's or an email's page, each allowed by a Django permission
(``mailfathom.requeue_job``, ``drop_job``, ``release_job``, ``resolve_email``;
superusers hold them all, others get them through users and groups like any
permission), and audited with the admin user as the actor: ``admin:<username>``.
Seeing the pages needs ``mailfathom.view_job`` / ``mailfathom.view_email``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from mailfathom.console import Console
from mailfathom.console.query import HELD, JobQuery
from mailfathom.contrib.django.app import get_app
from mailfathom.contrib.django.models import Email, Job
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import MailFathomError, NotFound
from mailfathom.jobs.state import JobState

__all__ = ["EmailAdmin", "JobAdmin", "actor"]

#: Rows per page of a listing.
PAGE_SIZE = 50
#: The job moves the admin offers, each with the state a job must be in and the verb shown.
JOB_MOVES = {
    "requeue": (JobState.DEAD_LETTERED, "Requeue"),
    "drop": (JobState.DEAD_LETTERED, "Drop"),
    "release": (HELD, "Release (run now)"),
}
#: How an unknown outcome may be settled (``mf.outbox.resolve``).
RESOLUTIONS = {
    "delivered": "It was delivered",
    "send_again": "Send it again",
    "give_up": "Give up",
}


def actor(request: HttpRequest) -> str:
    """Who acts, for mailfathom's audit trail: ``admin:<username>``."""
    return f"admin:{request.user.get_username()}"


def _holds(request: HttpRequest, codename: str) -> bool:
    """Whether the admin user holds ``mailfathom.<codename>`` (superusers hold all)."""
    has_perm = getattr(request.user, "has_perm", None)
    return bool(has_perm is not None and has_perm(f"mailfathom.{codename}"))


class _ViewsAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A ``ModelAdmin`` whose pages are views over mailfathom, not over a table."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Nothing is added from the admin."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Rows change only through the moves, each with its own permission."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nothing is deleted from the admin (retention prunes)."""
        return False

    def _name(self, suffix: str) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_{suffix}"

    def _page(
        self, request: HttpRequest, template: str, title: str, **context: Any
    ) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return TemplateResponse(
            request,
            f"mailfathom/admin/{template}",
            {**self.admin_site.each_context(request), "opts": self.opts, "title": title, **context},
        )

    def _mayview(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied


class JobAdmin(_ViewsAdmin):
    """Jobs by state, newest first; a job's page with its attempts, audit trail and moves."""

    def get_urls(self) -> list[URLPattern]:
        """The listing, a job's page, and a move on it (POST)."""
        site = self.admin_site
        return [
            path("", site.admin_view(self.list_view), name=self._name("changelist")),
            path("<int:job_id>/", site.admin_view(self.detail_view), name=self._name("change")),
            path(
                "<int:job_id>/<str:move>/",
                site.admin_view(require_POST(self.move_view)),
                name=self._name("move"),
            ),
        ]

    def list_view(self, request: HttpRequest) -> HttpResponse:
        """``?state=…`` (a state or ``held``) and ``?before=ID`` to page on."""
        self._mayview(request)
        state = request.GET.get("state") or None
        try:
            query = JobQuery.parse({"state": state})
            before = int(request.GET["before"]) if request.GET.get("before") else None
            page = Console(get_app()).jobs(query, before_id=before, limit=PAGE_SIZE)
        except (MailFathomError, ValueError) as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse(f"admin:{self._name('changelist')}"))
        counts = get_app().jobs.counts()
        states = [(s.value, counts.get(s, 0)) for s in JobState]
        return self._page(
            request,
            "job_list.html",
            "Jobs",
            page=page,
            state=state,
            states=states,
            held=HELD,
        )

    def detail_view(self, request: HttpRequest, job_id: int) -> HttpResponse:
        """The job, every failed attempt (with its traceback), its audit trail, its moves."""
        self._mayview(request)
        try:
            detail = Console(get_app()).job(job_id)
        except NotFound as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse(f"admin:{self._name('changelist')}"))
        job = detail.job
        held = job.state is JobState.PENDING and job.available_at is None
        moves = [
            (move, verb)
            for move, (state, verb) in JOB_MOVES.items()
            if (held if state == HELD else job.state is state) and _holds(request, f"{move}_job")
        ]
        return self._page(
            request, "job_detail.html", f"Job {job.id}", detail=detail, job=job, moves=moves
        )

    def move_view(self, request: HttpRequest, job_id: int, move: str) -> HttpResponse:
        """Requeue, drop or release the job, if the user holds that move's permission."""
        if move not in JOB_MOVES or not _holds(request, f"{move}_job"):
            raise PermissionDenied
        reason = request.POST.get("reason", "").strip() or None
        try:
            Console(get_app()).act(move, job_id, actor=actor(request), reason=reason)
        except MailFathomError as exc:
            messages.error(request, f"{move}: {exc}")
        else:
            messages.success(request, f"job {job_id}: {move} done")
        return HttpResponseRedirect(reverse(f"admin:{self._name('change')}", args=[job_id]))


class EmailAdmin(_ViewsAdmin):
    """Emails by stage, newest first; an email's page with its recipients, parts, stage
    history and delivery attempts, and the resolution of an unknown outcome."""

    def get_urls(self) -> list[URLPattern]:
        """The listing, an email's page, and resolving it (POST)."""
        site = self.admin_site
        return [
            path("", site.admin_view(self.list_view), name=self._name("changelist")),
            path("<int:email_id>/", site.admin_view(self.detail_view), name=self._name("change")),
            path(
                "<int:email_id>/resolve/",
                site.admin_view(require_POST(self.resolve_view)),
                name=self._name("resolve"),
            ),
        ]

    def list_view(self, request: HttpRequest) -> HttpResponse:
        """``?stage=…`` and ``?before=ID`` to page on."""
        self._mayview(request)
        stage = request.GET.get("stage") or None
        try:
            before = int(request.GET["before"]) if request.GET.get("before") else None
            page = Console(get_app()).outbox(stage, before_id=before, limit=PAGE_SIZE)
        except (MailFathomError, ValueError) as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse(f"admin:{self._name('changelist')}"))
        counts = get_app().outbox.counts()
        stages = [(s.value, counts.get(s, 0)) for s in OutgoingEmailStage]
        return self._page(
            request, "email_list.html", "Emails", page=page, stage=stage, stages=stages
        )

    def detail_view(self, request: HttpRequest, email_id: int) -> HttpResponse:
        """The email's recipients (with each server reply), parts, history and attempts."""
        self._mayview(request)
        try:
            detail = Console(get_app()).email(email_id)
        except NotFound as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse(f"admin:{self._name('changelist')}"))
        email = detail.email
        resolvable = email.stage is OutgoingEmailStage.TRANSMISSION_BEGUN or (
            email.stage is OutgoingEmailStage.RECORDED and email.body_transmissions > 0
        )
        return self._page(
            request,
            "email_detail.html",
            f"Email {email.id}",
            detail=detail,
            email=email,
            resolutions=RESOLUTIONS.items()
            if resolvable and _holds(request, "resolve_email")
            else (),
        )

    def resolve_view(self, request: HttpRequest, email_id: int) -> HttpResponse:
        """Settle the unknown outcome as the form says (a reason is required)."""
        if not _holds(request, "resolve_email"):
            raise PermissionDenied
        decision = request.POST.get("resolution", "")
        reason = request.POST.get("reason", "")
        try:
            Console(get_app()).resolve_email(
                email_id, decision, actor=actor(request), reason=reason
            )
        except MailFathomError as exc:
            messages.error(request, f"resolve: {exc}")
        else:
            messages.success(request, f"email {email_id}: resolved ({decision})")
        return HttpResponseRedirect(reverse(f"admin:{self._name('change')}", args=[email_id]))


admin.site.register(Job, JobAdmin)
admin.site.register(Email, EmailAdmin)
