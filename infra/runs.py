"""Where a run lives on the shared volume: its data directory and its run directory, by what
changes the result.

One directory per training configuration: ``<mountPath>/runs/<stack>-<namespace>-<prefix>/<key>``,
``key`` being 12 hex digits of the SHA-256 of everything that changes what is learnt (``run_key``).
A changed hyperparameter is then a new directory beside the old run, whose files stay as they
were; raising only ``hyperparams.epochs`` keeps the directory, so the new tasks resume from its
latest checkpoint. The stack, namespace and prefix in the path keep two stacks on one volume
apart (neither restores nor prunes the other's checkpoints).

The data lives in ``<mountPath>/mnist/<source key>``, keyed by the source (``source_key``): a
changed data.source stages into a new directory, and so (the data key is part of the run key)
makes a new run, never training on the files an earlier source left. The trainer images are
part of the run key too (``trainer_images``), as configured: an image named by digest that is
built and pushed again is a new reference, so it starts a new run instead of resuming one with
other code; a tag keeps its run when pushed again, though `pulumi up` runs its new digest
(infra/image_pins.py); on the base image, the content hashes of the code and the packages are.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from infra import bundle
from infra.settings import Settings
from infra.url_credentials import without_credentials
from trainer.contract import cluster_spec as cs
from trainer.contract import recipe

#: Hex digits of a directory key: 48 bits, so two configurations of one stack collide with a
#: chance of about 1e-14 (the key is not a security boundary: the stack writes it).
KEY_DIGITS = 12


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_DIGITS]


def source_key(source: str | tuple[str, ...] | None) -> str:
    """The data directory's key: 12 hex digits of the SHA-256 of data.source as JSON (null for
    the sample in the image; a list of URLs as that list, in its order), each URL without its
    credentials (``url_credentials.without_credentials``): a presigned URL signed again names
    the same files, so it keeps the data directory and the run."""
    if isinstance(source, tuple):
        return _digest([without_credentials(url) for url in source])
    return _digest(source if source is None else without_credentials(source))


def layout(replicas: cs.Replicas, gpu_count: int) -> dict[str, Any]:
    """The part of the replica layout that changes the result.

    Synchronous training (ps 0: MultiWorkerMirroredStrategy over chief and workers) averages
    one batch per replica into each step, so the replica count (and the GPUs each trains on)
    sets the global batch and the scaled learning rate. With ps, each worker's batch is one
    update of its own: more or fewer workers (or ps, which only hold the variables) continue the
    same run, whose checkpoints any layout of ps restores.
    """
    if replicas.ps > 0:
        return {"strategy": "parameter_server"}
    return {
        "strategy": "multi_worker_mirrored",
        "replicas": replicas.chief + replicas.worker,
        "gpusPerReplica": gpu_count,
    }


def trainer_images(
    worker_image: str, cpu_image: str, worker_packages: str | None = None, cpu_packages: str | None = None
) -> dict[str, Any]:
    """The code that trains, as the run key holds it: the workers' and the CPU trainer image
    (ps, a CPU chief, staging). TensorBoard's is left out: it only shows the run.

    An image of your own (``*_packages`` None) is its reference as configured
    (``TaskSettings.reference``): a digest (``@sha256:``) names the image's content, so a push
    that changes the code makes a new reference and a new run; a tag pushed again keeps the
    reference, the key and the run, whose tasks the next `pulumi up` replaces, all on the new
    digest (infra/image_pins.py), and which resume from its checkpoint.

    A role on the base image runs the trainer's code from ConfigMaps and a package set from the
    volume: the key holds the base image with the code's content hash and the set's
    (infra/bundle.py), so a change to either is a new run, and the same code on the same
    packages is the same run on every machine that runs `pulumi up`.
    """

    def code(image: str, packages: str | None) -> Any:
        if packages is None:
            return image
        return {
            "image": image,
            "code": bundle.code_hash(),
            "packages": f"{packages}-{bundle.lock_hash(packages)}",
        }

    return {"worker": code(worker_image, worker_packages), "ps": code(cpu_image, cpu_packages)}


def run_key(settings: Settings) -> str:
    """The run directory's key: 12 hex digits of the SHA-256 of the recipe (every trainer flag
    that changes what is learnt, except the epochs: ``recipe.run_key_recipe``), the data key
    (``source_key``), the ``layout`` and the trainer images (``trainer_images``: the code that
    trains is part of what is learnt)."""
    t = settings.training
    return _digest(
        {
            "recipe": recipe.run_key_recipe(settings.hyperparams),
            "data": source_key(settings.data.source),
            "layout": layout(t.replicas, t.worker.gpus),
            "images": trainer_images(t.worker.reference, t.ps.reference, t.worker.packages, t.ps.packages),
        }
    )


def runs_dir(settings: Settings) -> str:
    """The directory of a stack's runs: ``<mountPath>/runs/<stack>-<namespace>-<prefix>``
    (TensorBoard's --logdir: it shows every run of the stack)."""
    return f"{settings.mount_path}/runs/{settings.stack}-{settings.namespace}-{settings.name_prefix}"


def data_dir(settings: Settings) -> str:
    """Where staging puts MNIST and the trainer reads it (``--data_dir``), by data.source:
    ``<mountPath>/mnist/<source key>``."""
    return f"{settings.mount_path}/mnist/{source_key(settings.data.source)}"


def log_dir(settings: Settings) -> str:
    """The configuration's run directory, ``<runs_dir>/<run_key>``: the trainer's --log_dir."""
    return f"{runs_dir(settings)}/{run_key(settings)}"
