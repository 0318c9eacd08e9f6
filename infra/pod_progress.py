"""How far a scheduled pod has come toward starting: its last step and an image pull in flight,
from its status and the kubelet's Events, as the API server lists them.

Standard library only: the run monitor's ConfigMap delivers this file beside run_monitor.py
(infra/components/monitor.py), which imports it.

The kubelet reports each step of starting a pod as an Event on the pod (k8s.io/kubernetes
pkg/kubelet/images/image_manager.go and kuberuntime_container.go): ``Pulling`` (``Pulling image
"X"``) when a pull begins, ``Pulled`` when it ends (``Successfully pulled image "X" in 2m3s
(2m3s including waiting). Image size: N bytes.``, or ``Container image "X" already present on
machine``), ``Created`` and ``Started`` for each container, and on a failure ``Failed``
(``Failed to pull image "X": ...``, ``Error: ErrImagePull``) and ``BackOff`` (``Back-off pulling
image "X"``). A repeated Event is one object whose ``count`` and ``lastTimestamp`` grow, so a
pull that is retried shows one ``Pulling`` Event of count > 1.

A step (``last_step``): the pod's scheduling, the start of its first pull of an image (a retry is
no step), each ``Pulled``, ``Created`` and ``Started``, and an init container that started or
finished. ``Failed`` and ``BackOff`` are none, however often they repeat: a pull that keeps
failing makes no progress.

A pull in flight (``pull_in_flight``): the latest pull Event of an image is a first ``Pulling``
(count 1), with no ``Pulled``, ``Failed`` or ``BackOff`` of that image after it, while the
container waits in neither ErrImagePull nor ImagePullBackOff. The kubelet reports nothing while
it pulls, so one large image is one silent stretch; containerd (1.7 and later) cancels a pull that
reads no data for ``image_pull_progress_timeout`` (5 min by default; containerd pkg/cri/config),
after which the kubelet reports ``Failed``: a pull still in flight is still receiving data. The
API server keeps an Event for ``--event-ttl`` (1 h by default): a pull in flight for longer has
no Event left, and counts from the pod's last step that has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

#: Reasons of the kubelet's Events that mark a step at their lastTimestamp.
STEP_REASONS = ("Pulled", "Created", "Started")
#: Reasons of the kubelet's Events about one image's pull (the image is quoted in the message).
PULL_REASONS = ("Pulling", "Pulled", "Failed", "BackOff")
#: Waiting reasons of a container whose last pull failed: a pull then is a retry.
PULL_FAILED = ("ErrImagePull", "ImagePullBackOff")
IMAGE = re.compile(r'image "([^"]+)"')


def parse_time(stamp: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp (``2026-01-02T11:50:00Z``, or with
    microseconds as an Event's ``eventTime``: ``2026-01-02T11:50:00.123456Z``), or None."""
    if not stamp:
        return None
    whole = stamp.split(".", 1)[0].rstrip("Z")
    return datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def stamp(seconds: float) -> str:
    """``seconds`` since the epoch as an API timestamp, for messages."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_at(pod: Mapping) -> float | None:
    """When the pod was scheduled (PodScheduled True), or None."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status")) == ("PodScheduled", "True"):
            return parse_time(cond.get("lastTransitionTime"))
    return None


def events_of(pod: Mapping, events: Sequence[Mapping]) -> list[Mapping]:
    """The Events about ``pod``: its kind, name and (where both have one) uid."""
    meta = pod.get("metadata", {})
    name, uid = meta.get("name"), meta.get("uid")
    found = []
    for event in events:
        about = event.get("involvedObject") or {}
        if (
            about.get("kind") == "Pod"
            and about.get("name") == name
            and (not uid or about.get("uid") in (None, uid))
        ):
            found.append(event)
    return found


def _last(event: Mapping) -> float | None:
    """When the Event last happened: lastTimestamp, else eventTime, else firstTimestamp."""
    series = event.get("series") or {}
    return (
        parse_time(event.get("lastTimestamp"))
        or parse_time(series.get("lastObservedTime"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
    )


def _first(event: Mapping) -> float | None:
    """When the Event first happened: firstTimestamp, else eventTime, else its last time."""
    return parse_time(event.get("firstTimestamp")) or parse_time(event.get("eventTime")) or _last(event)


def _image(event: Mapping) -> str | None:
    found = IMAGE.search(event.get("message") or "")
    return found.group(1) if found else None


def last_step(pod: Mapping, events: Sequence[Mapping]) -> tuple[float, str] | None:
    """(when, what) of the pod's latest step toward starting (module docstring), ``what`` in
    words (``Pulled: Successfully pulled image "x" in 2m3s ...``); None for an unscheduled pod.

    Args:
        events: the pod's Events (``events_of``).
    """
    since = scheduled_at(pod)
    if since is None:
        return None
    steps = [(since, "scheduled")]
    for event in events:
        reason = event.get("reason")
        if reason == "Pulling":
            when = _first(event)
        elif reason in STEP_REASONS:
            when = _last(event)
        else:
            continue
        if when is not None:
            steps.append((when, f"{reason}: {event.get('message') or ''}".rstrip(": ")))
    for status in pod.get("status", {}).get("initContainerStatuses") or []:
        state = status.get("state") or {}
        running, done = state.get("running") or {}, state.get("terminated") or {}
        for when, what in (
            (parse_time(running.get("startedAt")), "started"),
            (parse_time(done.get("finishedAt")) if done.get("exitCode") == 0 else None, "finished"),
        ):
            if when is not None:
                steps.append((when, f"init container {status.get('name')} {what}"))
    return max(steps, key=lambda step: step[0])


def pull_in_flight(pod: Mapping, events: Sequence[Mapping]) -> tuple[float, str] | None:
    """(since when, image) of the pod's pull in flight (module docstring), the one that began
    first when there are several; None when none is.

    Args:
        events: the pod's Events (``events_of``).
    """
    statuses = [
        *(pod.get("status", {}).get("initContainerStatuses") or []),
        *(pod.get("status", {}).get("containerStatuses") or []),
    ]
    failing = {
        s.get("image")
        for s in statuses
        if ((s.get("state") or {}).get("waiting") or {}).get("reason") in PULL_FAILED
    }
    latest: dict[str, tuple[float, int, Mapping]] = {}
    for event in events:
        image, when = _image(event), _last(event)
        if event.get("reason") not in PULL_REASONS or image is None or when is None:
            continue
        # A pull's end within the second it began is later than the begin.
        order = (when, 0 if event.get("reason") == "Pulling" else 1)
        if image not in latest or order > latest[image][:2]:
            latest[image] = (*order, event)
    flights = [
        (_first(event) or when, image)
        for image, (when, _, event) in latest.items()
        if event.get("reason") == "Pulling" and (event.get("count") or 1) == 1 and image not in failing
    ]
    return min(flights) if flights else None


def latest_warning(events: Sequence[Mapping]) -> str | None:
    """``reason: message`` of the latest Warning Event (a volume that does not mount:
    ``FailedMount: MountVolume.SetUp failed ...``), or None."""
    warnings = [(_last(e) or 0.0, e) for e in events if e.get("type") == "Warning"]
    if not warnings:
        return None
    event = max(warnings, key=lambda pair: pair[0])[1]
    return f"{event.get('reason') or 'Warning'}: {event.get('message') or 'no message'}"


def unschedulable_since(pod: Mapping, events: Sequence[Mapping] = ()) -> tuple[float, str] | None:
    """(since when, the scheduler's message) for a pending pod the scheduler cannot place
    (``events``: unused, for StartLimit)."""
    if pod.get("status", {}).get("phase") != "Pending":
        return None
    for cond in pod.get("status", {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        ):
            since = parse_time(cond.get("lastTransitionTime")) or parse_time(
                pod.get("metadata", {}).get("creationTimestamp")
            )
            return (since, cond.get("message") or "no message") if since is not None else None
    return None


def not_started_since(pod: Mapping, events: Sequence[Mapping] = ()) -> tuple[float, str] | None:
    """(since when, why) for a scheduled pod whose containers have not all started and that has
    no image pull in flight: since its last step toward starting (``last_step``: its
    scheduling, else a later pull begun or ended, a container created...), why its first waiting
    container waits, in the kubelet's words (``ImagePullBackOff (image x): Back-off pulling image
    "x"``), with the latest Warning Event where the container says no more, and the last step
    when it came after the scheduling; a pod without container statuses yet waits in
    ContainerCreating. A running, finished or unscheduled pod, or one pulling: None.

    Args:
        events: the pod's Events (``events_of``); none: the pod's status alone.
    """
    status = pod.get("status", {})
    step = last_step(pod, events)
    if status.get("phase") != "Pending" or step is None or pull_in_flight(pod, events):
        return None
    since, what = step
    last = "" if what == "scheduled" else f"; last step at {stamp(since)}: {what}"
    warning = latest_warning(events)
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            said = waiting.get("message") or warning
            message = f": {said}" if said else ""
            return (
                since,
                f"{waiting.get('reason') or 'Waiting'} (image {container.get('image')}){message}{last}",
            )
    if not status.get("containerStatuses"):
        return since, f"ContainerCreating{f': {warning}' if warning else ''}{last}"
    return None


#: How many start timeouts one image pull in flight may take: an hour at the default 900 s, the
#: 6.7 GB GPU image at about 2 MB/s. Only a runtime that does not cancel a pull without progress
#: (containerd before 1.7) needs the bound; the API server's 1 h Event TTL ends it too.
PULL_TIMEOUTS = 4


def pulling_since(pod: Mapping, events: Sequence[Mapping] = ()) -> tuple[float, str] | None:
    """(since when, why) for a pending pod with an image pull in flight (``pull_in_flight``)."""
    if pod.get("status", {}).get("phase") != "Pending":
        return None
    flight = pull_in_flight(pod, events)
    if flight is None:
        return None
    return flight[0], f"image {flight[1]} since {stamp(flight[0])}, neither pulled nor failed yet"
