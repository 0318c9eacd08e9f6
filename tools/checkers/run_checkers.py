"""Runs checkov and kube-score (pinned and installed by tools/checkers/checkers.sh) over
rendered Kubernetes manifests and lists what they find.

    .venv/bin/python tools/checkers/run_checkers.py DIR     (DIR: *.yaml, e.g. from
                                                             tools/render-manifests)

Prints one line per finding (checker, check id, file, object, message), then each checker's
count; exit status 1 when there is any finding, 0 when there is none.

What counts as a finding:
- checkov (``--framework kubernetes``): every failed check (one per check and object, a
  container counting as its own object); checks skipped by a ``checkov.io/skip*`` annotation
  are not findings.
- kube-score (``score``, its default checks): every comment of a check graded CRITICAL (1) or
  WARNING (5) (one per check, object and container, as its text output lists them); checks
  named in a ``kube-score/ignore`` annotation are skipped and are not findings. kube-score runs
  once per file: given several files it merges objects of the same kind, namespace and name.

Whether each suppression still suppresses something (tests/tools/test_checkers.py):
``strip_suppressions`` copies the files without the checkers' annotations, and
``idle_suppressions`` lists each annotation that no finding of a run over the copies matches on
its object.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "tools" / "checkers" / "checkers.sh"
#: kube-score's grades (scorecard.Grade): CRITICAL and WARNING are findings; 7 is "almost
#: OK", 10 "all OK".
KUBE_SCORE_FINDING_GRADES = (1, 5)


@dataclass(frozen=True)
class Finding:
    """One finding: ``checker`` (checkov or kube-score), its ``check_id`` (CKV_K8S_11,
    container-resources), the ``file`` name, the ``object`` (Kind/namespace/name, with the
    container where the check is about one) and the checker's ``message``."""

    checker: str
    check_id: str
    file: str
    object: str
    message: str

    def __str__(self) -> str:
        return f"{self.checker} {self.check_id} {self.file} {self.object}: {self.message}"


def install(timeout_s: float = 1800, cached_only: bool = False) -> dict[str, Path]:
    """Runs checkers.sh (installs or finds both checkers: minutes cold, instant cached) and
    returns {"checkov": path, "kube-score": path}; ``cached_only``: install nothing (its
    ``--cached``).

    Raises:
        RuntimeError: the script failed (or, with ``cached_only``, found them missing); its
            stderr's last lines are the message.
    """
    argv = ["bash", str(INSTALL_SCRIPT), *(["--cached"] if cached_only else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-20:])
        raise RuntimeError(f"{INSTALL_SCRIPT} failed (exit {proc.returncode}):\n{tail}")
    paths = dict(line.split("=", 1) for line in proc.stdout.splitlines()[-2:])
    return {name: Path(paths[name]) for name in ("checkov", "kube-score")}


def checkov(binary: Path, directory: Path) -> list[Finding]:
    """checkov's failed checks on every manifest in ``directory``.

    ``--skip-download``: no guideline or policy download (a run may have no internet, and
    the download makes every run several times slower). Raises RuntimeError when checkov fails (exit status other than
    0 or 1) or reports files it could not parse.
    """
    proc = subprocess.run(
        [
            str(binary),
            "--framework",
            "kubernetes",
            "-d",
            str(directory),
            "-o",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    reports = json.loads(proc.stdout)
    findings = []
    for report in reports if isinstance(reports, list) else [reports]:
        if report.get("summary", {}).get("parsing_errors"):
            raise RuntimeError(f"checkov could not parse: {report['results'].get('parsing_errors')}")
        for failed in report.get("results", {}).get("failed_checks", []):
            findings.append(
                Finding(
                    "checkov",
                    failed["check_id"],
                    failed["file_path"].lstrip("/"),
                    failed["resource"],
                    failed["check_name"],
                )
            )
    return findings


def kube_score(binary: Path, files: list[Path]) -> list[Finding]:
    """kube-score's CRITICAL and WARNING comments, one run per file of ``files``.

    Raises RuntimeError when kube-score fails (exit status other than 0 or 1, which it gives
    for a CRITICAL grade)."""
    findings = []
    for path in files:
        proc = subprocess.run([str(binary), "score", "-o", "json", str(path)], capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"kube-score failed on {path} (exit {proc.returncode}): {proc.stderr[-2000:]}")
        for scored in json.loads(proc.stdout) or []:
            for check in scored["checks"]:
                if check["skipped"] or check["grade"] not in KUBE_SCORE_FINDING_GRADES:
                    continue
                for comment in check["comments"] or [{}]:
                    where = f" [{comment['path']}]" if comment.get("path") else ""
                    message = ": ".join(p for p in (comment.get("summary"), comment.get("description")) if p)
                    findings.append(
                        Finding(
                            "kube-score",
                            check["check"]["id"],
                            path.name,
                            scored["object_name"] + where,
                            message or check["check"]["name"],
                        )
                    )
    return findings


#: The annotations by which an object suppresses checks (infra/components/checker_suppressions.py).
CHECKOV_SKIP_PREFIX = "checkov.io/skip"
KUBE_SCORE_IGNORE = "kube-score/ignore"

#: An object of a manifest file: (file name, kind, namespace, name); namespace "" when none.
ObjectKey = tuple[str, str, str, str]


def object_key(finding: Finding) -> ObjectKey:
    """The object a finding is about. checkov names it ``Kind.namespace.name`` (the stack's
    names have no dots); kube-score ``Kind/<group/version>/namespace/name``, a container
    appended as `` [name]``."""
    if finding.checker == "checkov":
        kind, namespace, name = (finding.object.split(".", 2) + ["", ""])[:3]
        return finding.file, kind, namespace, name
    parts = finding.object.split(" [", 1)[0].split("/")
    return finding.file, parts[0], parts[-2] if len(parts) > 3 else "", parts[-1]


def strip_suppressions(directory: Path, out: Path) -> dict[ObjectKey, set[tuple[str, str]]]:
    """Copies every ``*.yaml`` of ``directory`` to ``out`` with the checkers' annotations
    (``checkov.io/skip<N>``, ``kube-score/ignore``) taken off each object, so that a run over
    ``out`` reports what they suppressed.

    Returns:
        Each object that carried any -> the (checker, check id) pairs it suppressed.
    """
    out.mkdir(parents=True, exist_ok=True)
    carried: dict[ObjectKey, set[tuple[str, str]]] = {}
    for path in sorted(directory.glob("*.yaml")):
        docs = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
        for doc in docs:
            metadata = doc.get("metadata") or {}
            annotations = metadata.get("annotations") or {}
            pairs = {
                ("checkov", str(value).split("=", 1)[0].strip())
                for key, value in annotations.items()
                if key.startswith(CHECKOV_SKIP_PREFIX)
            }
            pairs |= {
                ("kube-score", check.strip())
                for check in str(annotations.get(KUBE_SCORE_IGNORE, "")).split(",")
                if check.strip()
            }
            if not pairs:
                continue
            key = (path.name, doc.get("kind", ""), metadata.get("namespace") or "", metadata.get("name", ""))
            carried.setdefault(key, set()).update(pairs)
            for name in [
                k for k in annotations if k.startswith(CHECKOV_SKIP_PREFIX) or k == KUBE_SCORE_IGNORE
            ]:
                del annotations[name]
        (out / path.name).write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return carried


def idle_suppressions(
    carried: dict[ObjectKey, set[tuple[str, str]]], unsuppressed: list[Finding]
) -> dict[tuple[str, str], list[ObjectKey]]:
    """The suppressions that suppress nothing: each (checker, check id) that an object carries
    (``strip_suppressions``) with no finding of that check on that object among
    ``unsuppressed`` (the checkers' run over the stripped copies), with those objects. Held per
    object, not per check id: two entries of the table may name one check (and kube-score's
    annotation names no entry), so a check found on one object says nothing of another's."""
    found = {(f.checker, f.check_id, object_key(f)) for f in unsuppressed}
    idle: dict[tuple[str, str], list[ObjectKey]] = {}
    for key, pairs in sorted(carried.items()):
        for pair in sorted(pairs):
            if (*pair, key) not in found:
                idle.setdefault(pair, []).append(key)
    return idle


def run(directory: Path, binaries: dict[str, Path] | None = None) -> dict[str, list[Finding]]:
    """Both checkers over the ``*.yaml`` files of ``directory``: {"checkov": [...],
    "kube-score": [...]}. ``binaries`` as ``install`` returns them (default: ``install()``)."""
    binaries = binaries or install()
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise RuntimeError(f"no *.yaml file in {directory}")
    return {
        "checkov": checkov(binaries["checkov"], directory),
        "kube-score": kube_score(binaries["kube-score"], files),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    found = run(Path(argv[0]))
    for findings in found.values():
        for finding in findings:
            print(finding)
    for checker, findings in found.items():
        print(f"{checker}: {len(findings)} findings")
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
