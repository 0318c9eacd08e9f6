"""Pods that probe the local cluster from inside, for its own tests (test_local_cluster.py):
the trainer image running a command (``trainer_pod``, ``trainer_job``), and the scripts it
runs: two peers that reach each other by name, a server, and a knocker that reports each change
of outcome of its connections to the server."""

from __future__ import annotations

from infra.settings import DEFAULT_REGISTRY, TRAINER_CPU_TAG

from .kube import Kube, pod_phase

TRAINER_IMAGE = f"{DEFAULT_REGISTRY}/{TRAINER_CPU_TAG}"


def trainer_pod(name: str, command: list[str], labels: dict | None = None) -> dict:
    """A pod that runs ``command`` in the trainer image the node holds (never pulled), once."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": TRAINER_IMAGE, "imagePullPolicy": "Never", "command": command}
            ],
        },
    }


def trainer_job(name: str, command: list[str], backoff_limit: int) -> dict:
    """A Job of ``trainer_pod``'s pod, retried up to ``backoff_limit`` times."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": backoff_limit, "template": {"spec": trainer_pod(name, command)["spec"]}},
    }


#: Each pod serves its name on port 8000 and connects to the other by its headless Service's
#: DNS name; it exits 0 once it has reached the peer and been reached by it.
PEER_SCRIPT = r"""
import socket, sys, threading, time
me, peer = sys.argv[1], sys.argv[2]
served = threading.Event()
srv = socket.create_server(("", 8000))
def serve():
    while True:
        conn, _ = srv.accept()
        conn.sendall(me.encode()); conn.close(); served.set()
threading.Thread(target=serve, daemon=True).start()
deadline = time.time() + 150
while time.time() < deadline:
    try:
        ip = socket.gethostbyname(peer)
        with socket.create_connection((peer, 8000), timeout=3) as s:
            print(f"reached {peer} at {ip}: {s.recv(64).decode()}", flush=True)
        break
    except OSError as err:
        time.sleep(0.5)
else:
    sys.exit("never reached " + peer)
sys.exit(0 if served.wait(max(1, deadline - time.time())) else "never reached by the peer")
"""


#: Accepts connections on port 8000 and closes them, forever.
SERVE_SCRIPT = r"""
import socket
server = socket.create_server(("", 8000))
while True:
    server.accept()[0].close()
"""
#: Opens a new TCP connection to argv[1]:8000 every 0.2 s, printing each change of outcome:
#: for argv[2] seconds; with argv[3] == "until-connected" until the first success (argv[2] caps
#: it); with argv[3] == "after-gone" until a connection fails after one succeeded, then argv[2]
#: seconds more (the test's deletion of the server ends it, however long that takes; 900 s cap).
KNOCK_SCRIPT = r"""
import socket, sys, time
address, seconds, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
until_connected, after_gone = mode == ["until-connected"], mode == ["after-gone"]
deadline, last, connected_once, gone = time.time() + (900 if after_gone else seconds), None, False, False
while time.time() < deadline:
    try:
        socket.create_connection((address, 8000), timeout=1).close()
        outcome = "connected"
    except OSError as e:
        outcome = "failed " + type(e).__name__
    if outcome != last:
        print(f"{time.time():.1f} {outcome}", flush=True)
        last = outcome
    if until_connected and outcome == "connected":
        break
    connected_once = connected_once or outcome == "connected"
    if after_gone and connected_once and outcome != "connected" and not gone:
        gone, deadline = True, time.time() + seconds
    time.sleep(0.2)
"""


def serve(kube: Kube, name: str) -> str:
    """Start SERVE_SCRIPT in pod ``name``; its IP once it runs."""
    kube.apply(trainer_pod(name, ["python", "-c", SERVE_SCRIPT]))
    kube.wait_for(f"pod {name} to run", lambda: pod_phase(kube, name) == "Running")
    return kube.get("pod", name)["status"]["podIP"]


def start_knocking(kube: Kube, name: str, address: str, seconds: int, *mode: str) -> None:
    """Start KNOCK_SCRIPT against ``address`` in pod ``name`` (``seconds``, ``mode``: its arguments)."""
    kube.apply(trainer_pod(name, ["python", "-c", KNOCK_SCRIPT, address, str(seconds), *mode]))


def knock_outcomes(kube: Kube, name: str, seconds: int) -> list[str]:
    """The outcome lines of KNOCK_SCRIPT's pod ``name`` (``seconds`` its argument) once it ends
    (in "after-gone" mode, call it once the server is gone)."""
    kube.wait_for(
        f"pod {name} to finish",
        lambda: pod_phase(kube, name) in ("Succeeded", "Failed"),
        timeout=seconds + 120,
    )
    logs = kube.logs(name)
    assert pod_phase(kube, name) == "Succeeded", logs
    return [line.split(" ", 1)[1] for line in logs.splitlines() if line[:1].isdigit()]
